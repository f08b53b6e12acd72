// 64-bit byte and FLOP arithmetic that reports overflow instead of wrapping.
//
// A 100B-parameter model at 1M tokens has byte counts near 2^50: fine in
// int64. Absurd inputs (hidden = 2^40) would wrap; the analytic model uses
// these helpers and rejects such inputs with a message.
#ifndef REMAT_CHECKED_MATH_H_
#define REMAT_CHECKED_MATH_H_

#include <cstdint>

namespace remat {

// Largest byte count remat accepts anywhere (4 EiB): leaves headroom for sums.
inline constexpr int64_t kMaxBytes = int64_t{1} << 62;

// Accumulates products and sums; `ok()` turns false on the first overflow or
// when a value exceeds kMaxBytes, and stays false.
class CheckedInt {
 public:
  CheckedInt() = default;
  explicit CheckedInt(int64_t v) : value_(v), ok_(v >= 0 && v <= kMaxBytes) {}

  CheckedInt operator*(CheckedInt other) const {
    CheckedInt r;
    r.ok_ = ok_ && other.ok_ && !__builtin_mul_overflow(value_, other.value_, &r.value_) &&
            r.value_ <= kMaxBytes;
    return r;
  }
  CheckedInt operator+(CheckedInt other) const {
    CheckedInt r;
    r.ok_ = ok_ && other.ok_ && !__builtin_add_overflow(value_, other.value_, &r.value_) &&
            r.value_ <= kMaxBytes;
    return r;
  }
  CheckedInt operator*(int64_t v) const { return *this * CheckedInt(v); }
  CheckedInt operator+(int64_t v) const { return *this + CheckedInt(v); }
  CheckedInt& operator+=(CheckedInt other) { return *this = *this + other; }

  bool ok() const { return ok_; }
  // Meaningful only when ok().
  int64_t value() const { return value_; }

 private:
  int64_t value_ = 0;
  bool ok_ = true;
};

}  // namespace remat

#endif  // REMAT_CHECKED_MATH_H_
