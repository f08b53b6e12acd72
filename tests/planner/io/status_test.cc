#include "remat/io/status.h"

#include <gtest/gtest.h>

#include <utility>
#include <vector>

namespace remat {
namespace {

TEST(Status, OkAndInvalid) {
  EXPECT_TRUE(Status::Ok().ok());
  const Status s = Status::Invalid("model.json: field 'layers': missing");
  EXPECT_FALSE(s.ok());
  EXPECT_EQ(s.code(), StatusCode::kInvalidInput);
  EXPECT_EQ(s.WithPrefix("x").message(), "x: model.json: field 'layers': missing");
}

// A JSON key holding a newline ("micro\n_batch", a model.json fuzzer input)
// is quoted escaped: the CLI's error stays one line.
TEST(Status, MessagesAreOneLine) {
  EXPECT_EQ(Status::Invalid("unknown field 'micro\n_batch'").message(),
            "unknown field 'micro\\n_batch'");
  EXPECT_EQ(Status::Invalid("a\tb\x1b[31m\x7f").message(), "a\\tb\\x1b[31m\\x7f");
  EXPECT_EQ(Status::Invalid("ok").WithPrefix("p\nq").message(), "p\\nq: ok");
  EXPECT_EQ(Status::Invalid("naïve ✓").message(), "naïve ✓");  // UTF-8 is not touched
}

// A value taken from a Result it no longer needs is moved out, not
// copied; one still named is read in place.
TEST(Result, ValueOfAnExpiringResultIsMoved) {
  Result<std::vector<int>> r(std::vector<int>(1000, 7));
  const int* held = r->data();
  const std::vector<int>& read = *r;
  EXPECT_EQ(read.data(), held);
  const std::vector<int> taken = *std::move(r);
  EXPECT_EQ(taken.data(), held);
  EXPECT_EQ(taken.size(), 1000u);
  auto make = [] { return Result<std::vector<int>>(std::vector<int>{1, 2, 3}); };
  EXPECT_EQ(*make(), (std::vector<int>{1, 2, 3}));
}

}  // namespace
}  // namespace remat
