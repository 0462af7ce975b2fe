#include <gtest/gtest.h>

#include "mixp/dtype.h"
#include "mixp/error.h"
#include "mixp/format.h"

namespace mixp {
namespace {

TEST(DType, TraitsAgreeWithTheEmulatedFormats) {
  for (DType d : {DType::f32, DType::f16, DType::bf16, DType::e4m3, DType::e5m2}) {
    const DTypeTraits& t = traits(d);
    const Format f = parse_format(t.name);
    EXPECT_EQ(t.max, f.max()) << t.name;
    EXPECT_EQ(t.min_normal, f.min_normal()) << t.name;
    EXPECT_EQ(t.min_subnormal, f.min_subnormal()) << t.name;
    EXPECT_EQ(t.epsilon, f.epsilon()) << t.name;
    EXPECT_EQ(t.has_infinity, f.has_infinity) << t.name;
    EXPECT_EQ(t.exponent_bits, f.exponent_bits) << t.name;
    EXPECT_EQ(t.mantissa_bits, f.mantissa_bits) << t.name;
    EXPECT_EQ(t.bias, f.bias) << t.name;
    EXPECT_EQ(t.size * 8, f.total_bits()) << t.name;
  }
}

TEST(DType, TraitsAgreeWithTheCppTypes) {
  EXPECT_EQ(traits(DType::f32).max, double(std::numeric_limits<float>::max()));
  EXPECT_EQ(traits(DType::f32).min_subnormal, double(std::numeric_limits<float>::denorm_min()));
  EXPECT_EQ(traits(DType::f32).epsilon, double(std::numeric_limits<float>::epsilon()));
  EXPECT_EQ(traits(DType::f64).max, std::numeric_limits<double>::max());
  EXPECT_EQ(traits(DType::f64).min_subnormal, std::numeric_limits<double>::denorm_min());
  EXPECT_EQ(traits(DType::f64).min_normal, std::numeric_limits<double>::min());
  EXPECT_EQ(traits(DType::i32).max, double(std::numeric_limits<int32_t>::max()));
  EXPECT_EQ(size_of(DType::i64), 8);
  EXPECT_EQ(size_of(DType::u8), 1);
  EXPECT_FALSE(is_floating(DType::i32));
}

TEST(DType, NamesParseBackAndAliasesWork) {
  EXPECT_EQ(int(all_dtypes().size()), kDTypeCount);
  for (DType d : all_dtypes()) EXPECT_EQ(parse_dtype(name_of(d)), d);
  EXPECT_EQ(parse_dtype("bfloat16"), DType::bf16);
  EXPECT_EQ(parse_dtype("half"), DType::f16);
  EXPECT_EQ(parse_dtype("fp8_e4m3"), DType::e4m3);
}

TEST(DType, ValuesAreFixed) {
  // Written into files: these numbers must never change.
  EXPECT_EQ(int(DType::f32), 0);
  EXPECT_EQ(int(DType::bf16), 3);
  EXPECT_EQ(int(DType::e5m2), 5);
  EXPECT_EQ(int(DType::u8), 8);
}

TEST(DType, UnknownNameIsAClearError) {
  try {
    parse_dtype("float8");
    FAIL() << "no error";
  } catch (const Error& e) {
    EXPECT_NE(e.message().find("'float8'"), std::string::npos);
    EXPECT_NE(e.message().find("bf16"), std::string::npos) << "lists the known names";
  }
}

}  // namespace
}  // namespace mixp
