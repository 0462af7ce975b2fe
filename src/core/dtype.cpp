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
      {"fp32", DType::f32},      {"float32", DType::f32},   {"float", DType::f32},
      {"fp64", DType::f64},      {"float64", DType::f64},   {"double", DType::f64},
      {"fp16", DType::f16},      {"float16", DType::f16},   {"half", DType::f16},
      {"bfloat16", DType::bf16}, {"fp8_e4m3", DType::e4m3}, {"e4m3fn", DType::e4m3},
      {"fp8_e5m2", DType::e5m2}, {"int32", DType::i32},     {"int64", DType::i64},
      {"uint8", DType::u8},
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
