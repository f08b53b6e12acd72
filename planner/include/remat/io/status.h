// Errors as values at library boundaries.
//
// Every function that can fail on user input returns a Status or a Result<T>.
// Messages are written for the person who typed the command: what was wrong,
// where (file, field), and what would be accepted. A message is always one
// line: control characters it quotes from the input (a key or file name with
// a newline) are escaped. No exception crosses a public remat API.
#ifndef REMAT_STATUS_H_
#define REMAT_STATUS_H_

#include <cstdio>
#include <optional>
#include <string>
#include <utility>

namespace remat {

// Kinds of failure. The CLI maps them to exit codes (ExitCodeFor, cli/cli.h).
enum class StatusCode {
  kOk = 0,
  kInvalidInput,   // bad file, field, flag or value: exit code 2
  kNoFit,          // no plan fits the budget: exit code 3
  kOutOfMemory,    // a run hit its memory limit: exit code 4
  kInternal,       // a bug in remat: exit code 1
  kOutputFailed,   // an output (file or standard output) could not be written: exit code 5
};

class Status {
 public:
  Status() = default;  // OK
  static Status Ok() { return Status(); }
  static Status Invalid(std::string message) {
    return Status(StatusCode::kInvalidInput, std::move(message));
  }
  static Status Internal(std::string message) {
    return Status(StatusCode::kInternal, std::move(message));
  }
  static Status NoFit(std::string message) {
    return Status(StatusCode::kNoFit, std::move(message));
  }
  static Status OutOfMemory(std::string message) {
    return Status(StatusCode::kOutOfMemory, std::move(message));
  }
  static Status OutputFailed(std::string message) {
    return Status(StatusCode::kOutputFailed, std::move(message));
  }
  Status(StatusCode code, std::string message)
      : code_(code), message_(OneLine(std::move(message))) {}

  bool ok() const { return code_ == StatusCode::kOk; }
  StatusCode code() const { return code_; }
  const std::string& message() const { return message_; }

  // Returns a copy whose message is "<prefix>: <message>".
  Status WithPrefix(const std::string& prefix) const {
    if (ok()) return *this;
    return Status(code_, prefix + ": " + message_);
  }

 private:
  // "\n", "\t" and "\xNN" for control characters.
  static std::string OneLine(std::string m) {
    bool clean = true;
    for (unsigned char c : m) clean = clean && c >= 0x20 && c != 0x7f;
    if (clean) return m;
    std::string out;
    for (unsigned char c : m) {
      if (c == '\n') {
        out += "\\n";
      } else if (c == '\t') {
        out += "\\t";
      } else if (c < 0x20 || c == 0x7f) {
        char hex[8];
        std::snprintf(hex, sizeof hex, "\\x%02x", c);
        out += hex;
      } else {
        out += static_cast<char>(c);
      }
    }
    return out;
  }

  StatusCode code_ = StatusCode::kOk;
  std::string message_;
};

// A value or the Status explaining why there is none.
template <typename T>
class Result {
 public:
  Result(T value) : value_(std::move(value)) {}         // NOLINT: implicit by design
  Result(Status status) : status_(std::move(status)) {  // NOLINT
    if (status_.ok()) status_ = Status::Internal("Result built from an OK status without a value");
  }

  bool ok() const { return value_.has_value(); }
  const Status& status() const { return status_; }
  const T& value() const& { return *value_; }
  T& value() & { return *value_; }
  T&& value() && { return std::move(*value_); }
  const T& operator*() const& { return *value_; }
  T& operator*() & { return *value_; }
  T&& operator*() && { return std::move(*value_); }  // *std::move(r), *F(): moves the value
  const T* operator->() const { return &*value_; }
  T* operator->() { return &*value_; }

 private:
  std::optional<T> value_;
  Status status_;
};

}  // namespace remat

// Returns early from the enclosing function if `expr` (a Status) is not OK.
#define REMAT_RETURN_IF_ERROR(expr)                \
  do {                                             \
    ::remat::Status remat_status_ = (expr);        \
    if (!remat_status_.ok()) return remat_status_; \
  } while (0)

#define REMAT_CONCAT_INNER_(a, b) a##b
#define REMAT_CONCAT_(a, b) REMAT_CONCAT_INNER_(a, b)
// `lhs = value of rexpr` or return its Status.
#define REMAT_ASSIGN_OR_RETURN(lhs, rexpr)                  \
  auto REMAT_CONCAT_(remat_result_, __LINE__) = (rexpr);    \
  if (!REMAT_CONCAT_(remat_result_, __LINE__).ok())         \
    return REMAT_CONCAT_(remat_result_, __LINE__).status(); \
  lhs = std::move(REMAT_CONCAT_(remat_result_, __LINE__)).value()

#endif  // REMAT_STATUS_H_
