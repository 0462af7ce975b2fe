#include "mixp/dtype.h"

#include <string>

#include "mixp/error.h"

namespace mixp {

std::span<const DType> all_dtypes() {
  static constexpr DType kAll[kDTypeCount] = {DType::f32,  DType::f64,  DType::f16,
                                              DType::bf16, DType::e4m3, DType::e5m2,
                                              DType::i32,  DType::i64,  DType::u8};
  return kAll;
}

DType parse_dtype(std::string_view name) {
  for (DType d : all_dtypes()) {
    if (name == name_of(d)) return d;
  }
  struct Alias {
    std::string_view alias;
    DType dtype;
  };
  static constexpr Alias kAliases[] = {
      {.alias = "fp32", .dtype = DType::f32},      {.alias = "float32", .dtype = DType::f32},
      {.alias = "float", .dtype = DType::f32},     {.alias = "fp64", .dtype = DType::f64},
      {.alias = "float64", .dtype = DType::f64},   {.alias = "double", .dtype = DType::f64},
      {.alias = "fp16", .dtype = DType::f16},      {.alias = "float16", .dtype = DType::f16},
      {.alias = "half", .dtype = DType::f16},      {.alias = "bfloat16", .dtype = DType::bf16},
      {.alias = "fp8_e4m3", .dtype = DType::e4m3}, {.alias = "e4m3fn", .dtype = DType::e4m3},
      {.alias = "fp8_e5m2", .dtype = DType::e5m2}, {.alias = "int32", .dtype = DType::i32},
      {.alias = "int64", .dtype = DType::i64},     {.alias = "uint8", .dtype = DType::u8},
  };
  for (const Alias& a : kAliases) {
    if (name == a.alias) return a.dtype;
  }
  std::string known;
  for (DType d : all_dtypes()) known += std::string(known.empty() ? "" : ", ") + name_of(d);
  MIXP_CHECK(false, "unknown dtype '", name, "'; known dtypes: ", known);
  return DType::f32;  // unreachable
}

}  // namespace mixp
