#include <gtest/gtest.h>

#include "mixp/error.h"

namespace mixp {
namespace {

int checked_sqrt_input(int x) {
  MIXP_CHECK(x >= 0, "sqrt: input must be non-negative, got ", x);
  return x;
}

TEST(Error, CheckThrowsWithTheValuesAndTheLocation) {
  EXPECT_EQ(checked_sqrt_input(4), 4);
  try {
    checked_sqrt_input(-3);
    FAIL() << "no error";
  } catch (const Error& e) {
    EXPECT_EQ(e.message(), "sqrt: input must be non-negative, got -3");
    EXPECT_NE(std::string(e.what()).find("error_test.cpp:"), std::string::npos) << e.what();
    EXPECT_FALSE(e.is_internal());
  }
}

TEST(Error, AssertSaysItIsABug) {
  try {
    MIXP_ASSERT(1 + 1 == 3, "arithmetic");
    FAIL() << "no error";
  } catch (const Error& e) {
    EXPECT_TRUE(e.is_internal());
    EXPECT_NE(e.message().find("a bug in mixp"), std::string::npos) << e.message();
    EXPECT_NE(e.message().find("1 + 1 == 3"), std::string::npos) << e.message();
  }
  EXPECT_NO_THROW(MIXP_ASSERT(true));
}

}  // namespace
}  // namespace mixp
