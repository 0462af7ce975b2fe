#include "tensor/element.h"

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstring>
#include <limits>
#include <vector>

#include "core/parallel.h"
#include "mixp/convert.h"
#include "mixp/format.h"
#include "tensor/tensor_impl.h"

namespace mixp {

float round_to_float_odd(double x) {
  if (!std::isfinite(x)) return float(x);
  float f = float(x);  // nearest even
  if (double(f) == x) return f;
  // Step back toward zero if rounding went away from it, then mark the result inexact.
  if (std::fabs(double(f)) > std::fabs(x)) f = std::nextafter(f, 0.0f);
  return std::bit_cast<float>(std::bit_cast<uint32_t>(f) | 1u);
}

double load_element(const void* data, DType dtype, int64_t i) {
  switch (dtype) {
    case DType::f32: return double(static_cast<const float*>(data)[i]);
    case DType::f64: return static_cast<const double*>(data)[i];
    case DType::f16: return double(float(static_cast<const float16*>(data)[i]));
    case DType::bf16: return double(float(static_cast<const bfloat16*>(data)[i]));
    case DType::e4m3: return double(float(static_cast<const float8_e4m3*>(data)[i]));
    case DType::e5m2: return double(float(static_cast<const float8_e5m2*>(data)[i]));
    case DType::i32: return double(static_cast<const int32_t*>(data)[i]);
    case DType::i64: return double(static_cast<const int64_t*>(data)[i]);
    case DType::u8: return double(static_cast<const uint8_t*>(data)[i]);
  }
  return 0.0;
}

namespace {
// Truncates toward zero, as a C++ cast does, after checking that the value fits.
template <typename I>
I to_integer(double v) {
  constexpr double lowest = double(std::numeric_limits<I>::min());
  constexpr double beyond = double(std::numeric_limits<I>::max()) + 1.0;  // a power of two
  MIXP_CHECK(std::isfinite(v) && v > lowest - 1.0 && v < beyond, "cannot store ", v,
             " in an integer tensor whose range is [", lowest, ", ", beyond, ")");
  return I(v);
}
}  // namespace

void store_element(void* data, DType dtype, int64_t i, double v) {
  switch (dtype) {
    case DType::f32: static_cast<float*>(data)[i] = float(v); return;
    case DType::f64: static_cast<double*>(data)[i] = v; return;
    case DType::f16: static_cast<float16*>(data)[i] = float16(round_to_float_odd(v)); return;
    case DType::bf16: static_cast<bfloat16*>(data)[i] = bfloat16(round_to_float_odd(v)); return;
    case DType::e4m3:
      static_cast<float8_e4m3*>(data)[i] = float8_e4m3(round_to_float_odd(v), Overflow::saturate);
      return;
    case DType::e5m2:
      static_cast<float8_e5m2*>(data)[i] = float8_e5m2(round_to_float_odd(v), Overflow::saturate);
      return;
    case DType::i32: static_cast<int32_t*>(data)[i] = to_integer<int32_t>(v); return;
    case DType::i64: static_cast<int64_t*>(data)[i] = to_integer<int64_t>(v); return;
    case DType::u8: static_cast<uint8_t*>(data)[i] = to_integer<uint8_t>(v); return;
  }
}

namespace {
// Bulk paths for the conversions a training step makes; everything else goes element by
// element through double, which is exact on the way in and rounds once on the way out.
bool has_bulk_kernel(DType s, DType d) {
  auto narrow = [](DType t) {
    return t == DType::bf16 || t == DType::f16 || t == DType::e4m3 || t == DType::e5m2;
  };
  return (s == DType::f32 && narrow(d)) || (d == DType::f32 && narrow(s));
}

// Elements [begin, end) through the bulk kernels of mixp/convert.h (FP8 saturating).
void convert_range(const void* src, DType s, void* dst, DType d, size_t begin, size_t end) {
  const size_t n = end - begin;
  if (s == DType::f32) {
    const std::span<const float> in(static_cast<const float*>(src) + begin, n);
    switch (d) {
      case DType::bf16: convert(in, std::span(static_cast<bfloat16*>(dst) + begin, n)); return;
      case DType::f16: convert(in, std::span(static_cast<float16*>(dst) + begin, n)); return;
      case DType::e4m3:
        convert(in, std::span(static_cast<float8_e4m3*>(dst) + begin, n), 1.0f, Overflow::saturate);
        return;
      case DType::e5m2:
        convert(in, std::span(static_cast<float8_e5m2*>(dst) + begin, n), 1.0f, Overflow::saturate);
        return;
      default: break;
    }
  } else {
    const std::span<float> out(static_cast<float*>(dst) + begin, n);
    switch (s) {
      case DType::bf16:
        convert(std::span(static_cast<const bfloat16*>(src) + begin, n), out);
        return;
      case DType::f16: convert(std::span(static_cast<const float16*>(src) + begin, n), out); return;
      case DType::e4m3:
        convert(std::span(static_cast<const float8_e4m3*>(src) + begin, n), out, 1.0f);
        return;
      case DType::e5m2:
        convert(std::span(static_cast<const float8_e5m2*>(src) + begin, n), out, 1.0f);
        return;
      default: break;
    }
  }
  MIXP_ASSERT(false, "no bulk conversion from ", name_of(s), " to ", name_of(d));
}
}  // namespace

void convert_elements(const Tensor& src, Tensor& dst) {
  MIXP_CHECK(src.numel() == dst.numel(), "convert: ", src.numel(), " elements into ", dst.numel());
  if (src.dtype() == dst.dtype()) {
    if (src.nbytes() > 0) std::memmove(dst.raw_data(), src.raw_data(), src.nbytes());
    return;
  }
  if (has_bulk_kernel(src.dtype(), dst.dtype())) {
    // In chunks over the threads: a conversion is memory-bound, and one core does not fill
    // the memory bandwidth.
    const void* in = src.raw_data();
    void* out = dst.raw_data();
    parallel_for(src.numel(), int64_t(1) << 16, [&](int64_t begin, int64_t end) {
      convert_range(in, src.dtype(), out, dst.dtype(), size_t(begin), size_t(end));
    });
    return;
  }
  const void* in = src.raw_data();
  void* out = dst.raw_data();
  for (int64_t i = 0; i < src.numel(); ++i)
    store_element(out, dst.dtype(), i, load_element(in, src.dtype(), i));
}

void convert_elements_stochastic(const Tensor& src, Tensor& dst, const PhiloxState& rng) {
  const size_t n = size_t(src.numel());
  const float* in = static_cast<const float*>(src.raw_data());
  if (dst.dtype() == DType::bf16) {
    convert_stochastic(std::span(in, n), std::span(static_cast<bfloat16*>(dst.raw_data()), n), rng);
    return;
  }
  std::vector<float> rounded(n);
  round_to_format(Format::fp16(), std::span(in, n), rounded, Rounding::stochastic,
                  Overflow::inf_or_nan, rng);
  convert(std::span<const float>(rounded), std::span(static_cast<float16*>(dst.raw_data()), n));
}

void fill_elements(Tensor& t, double value) {
  const int64_t n = t.numel();
  if (n == 0) return;
  char* bytes = static_cast<char*>(t.raw_data());
  const size_t total = size_t(n) * size_t(size_of(t.dtype()));
  // All-zero bits are +0 in every dtype.
  if (value == 0.0 && !std::signbit(value)) {
    std::memset(bytes, 0, total);
    return;
  }
  store_element(bytes, t.dtype(), 0, value);
  // Doubling copies: log2(n) memcpy calls instead of one per element.
  for (size_t filled = size_t(size_of(t.dtype())); filled < total; filled *= 2) {
    std::memcpy(bytes + filled, bytes, std::min(filled, total - filled));
  }
}

}  // namespace mixp
