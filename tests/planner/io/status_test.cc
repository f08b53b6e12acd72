#include "remat/io/status.h"

#include <gtest/gtest.h>

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

}  // namespace
}  // namespace remat
