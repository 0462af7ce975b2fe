// mixp formats: the table of every number format mixp stores or emulates.
#include <cmath>
#include <string>
#include <vector>

#include "commands.h"
#include "mixp/dtype.h"
#include "mixp/format.h"

namespace mixp::cli {
namespace {

struct Row {
  std::string name;
  std::string kind;  // "storage" for dtypes, "emulated" for formats without a dtype
  int exponent_bits, mantissa_bits, bias;
  double max, min_normal, min_subnormal, epsilon;
  bool has_infinity;
  std::string nan;
};

// A value with its power of two when it is one, e.g. "5.96046e-08 (2^-24)".
std::string show(double v) {
  char text[64];
  std::snprintf(text, sizeof text, "%.6g", v);
  int e = 0;
  if (std::frexp(v, &e) == 0.5) {
    std::string s(text);
    return s + " (2^" + std::to_string(e - 1) + ")";
  }
  return text;
}

std::string nan_text(NanEncoding nan) {
  switch (nan) {
    case NanEncoding::ieee: return "exp all ones";
    case NanEncoding::all_ones: return "S.1...1 only";
    case NanEncoding::negative_zero: return "0x80 (no -0)";
    case NanEncoding::none: return "none";
  }
  return "?";
}

Row row_of(const Format& f, const char* kind) {
  return Row{f.name(),    kind,           f.exponent_bits, f.mantissa_bits,
             f.bias,      f.max(),        f.min_normal(),  f.min_subnormal(),
             f.epsilon(), f.has_infinity, nan_text(f.nan)};
}

}  // namespace

int run_formats(std::FILE* out) {
  std::vector<Row> rows;
  const DTypeTraits& f64 = traits(DType::f64);
  rows.push_back(Row{f64.name, "storage", f64.exponent_bits, f64.mantissa_bits, f64.bias, f64.max,
                     f64.min_normal, f64.min_subnormal, f64.epsilon, true, "exp all ones"});
  for (const Format& f : standard_formats()) {
    bool is_dtype = false;
    for (DType d : all_dtypes()) is_dtype = is_dtype || (is_floating(d) && f.name() == name_of(d));
    rows.push_back(row_of(f, is_dtype ? "storage" : "emulated"));
  }
  std::fprintf(out, "%-9s %-9s %-6s %5s %-22s %-22s %-22s %-18s %-4s %s\n", "format", "kind",
               "s/e/m", "bias", "max", "min normal", "min subnormal", "epsilon", "inf", "NaN");
  for (const Row& r : rows) {
    const std::string bits =
        "1/" + std::to_string(r.exponent_bits) + "/" + std::to_string(r.mantissa_bits);
    std::fprintf(out, "%-9s %-9s %-6s %5d %-22s %-22s %-22s %-18s %-4s %s\n", r.name.c_str(),
                 r.kind.c_str(), bits.c_str(), r.bias, show(r.max).c_str(),
                 show(r.min_normal).c_str(), show(r.min_subnormal).c_str(), show(r.epsilon).c_str(),
                 r.has_infinity ? "yes" : "no", r.nan.c_str());
  }
  std::fprintf(out,
               "\nstorage: a tensor dtype with its own type and bulk kernels; emulated: rounding "
               "by mixp's format emulator.\nOCP E4M3 is the 'fn' variant (no infinity); e2m1, "
               "e2m3 and e3m2 are the OCP Microscaling element formats.\n");
  return 0;
}

}  // namespace mixp::cli
