// The fast FP8 kernels: quantization through the vectorized scaled conversions of mixp::convert
// in parallel chunks, and the FP8 GEMM as a oneDNN bf16 GEMM on exactly widened values (f32
// where the CPU lacks AVX-512 BF16: also exact). kernels/ref/fp8_ref.cpp holds the references.
#include <algorithm>
#include <array>
#include <cmath>
#include <limits>
#include <span>
#include <vector>

#include "kernels/cpu/parallel.h"
#include "kernels/fp8.h"
#include "kernels/gemm.h"
#include "mixp/convert.h"
#include "mixp/float_types.h"

namespace mixp::kernels {
namespace {

constexpr int64_t kGrain = 1 << 15;

void encode_span(const float* x, int64_t n, DType fp8, float scale, uint8_t* q) {
  void* out = q;
  if (fp8 == DType::e4m3) {
    convert(std::span<const float>(x, size_t(n)),
            std::span<float8_e4m3>(static_cast<float8_e4m3*>(out), size_t(n)), scale,
            Overflow::saturate);
  } else {
    convert(std::span<const float>(x, size_t(n)),
            std::span<float8_e5m2>(static_cast<float8_e5m2*>(out), size_t(n)), scale,
            Overflow::saturate);
  }
}

// Serial max |x| of a span with NaN sticking, in a form the compiler vectorizes.
float span_amax(const float* x, int64_t n) {
  float m = 0.0f;
  bool nan = false;
  for (int64_t i = 0; i < n; ++i) {
    const float a = std::fabs(x[i]);
    nan |= a != a;
    m = a > m ? a : m;
  }
  return nan ? std::numeric_limits<float>::quiet_NaN() : m;
}

float combine(float a, float b) {
  if (std::isnan(a) || std::isnan(b)) return std::numeric_limits<float>::quiet_NaN();
  return std::max(a, b);
}

const std::array<float, 256>& decode_table(DType fp8) {
  static const std::array<std::array<float, 256>, 2> tables = [] {
    std::array<std::array<float, 256>, 2> t{};
    for (int c = 0; c < 256; ++c) {
      t[0][size_t(c)] = float(float8_e4m3::from_bits(uint8_t(c)));
      t[1][size_t(c)] = float(float8_e5m2::from_bits(uint8_t(c)));
    }
    return t;
  }();
  return tables[fp8 == DType::e4m3 ? 0 : 1];
}

// The widened operand, [batch * rows, width] from columns [k0, k0 + width) of an [.., k] one:
// fp8 values (times the MX block scale when `with_mx`), rounded to bf16 — exact, see fp8.h —
// or kept in f32 where the GEMM takes no bf16.
struct Widened {
  std::vector<bfloat16> bf16;
  std::vector<float> f32;
  const void* data() const {
    return bf16.empty() ? static_cast<const void*>(f32.data()) : bf16.data();
  }
};

Widened widen(const Fp8Operand& op, int64_t total_rows, int64_t k, int64_t k0, int64_t width,
              bool use_bf16) {
  const std::array<float, 256>& table = decode_table(op.dtype);
  const int64_t nb = (k + kMxBlock - 1) / kMxBlock;
  Widened w;
  const size_t count = size_t(total_rows * width);
  if (use_bf16)
    w.bf16.resize(count);
  else
    w.f32.resize(count);
  parallel_for(total_rows, std::max<int64_t>(1, kGrain / std::max<int64_t>(width, 1)),
               [&](int64_t begin, int64_t end) {
                 std::vector<float> row(static_cast<size_t>(width));
                 for (int64_t r = begin; r < end; ++r) {
                   const uint8_t* src = op.data + r * k + k0;
                   for (int64_t j = 0; j < width; ++j) row[size_t(j)] = table[src[j]];
                   if (op.kind == Fp8Operand::Kind::mx) {
                     for (int64_t j0 = 0; j0 < width; j0 += kMxBlock) {
                       const float s = e8m0_value(op.codes[r * nb + (k0 + j0) / kMxBlock]);
                       const int64_t j1 = std::min(width, j0 + kMxBlock);
                       for (int64_t j = j0; j < j1; ++j) row[size_t(j)] *= s;
                     }
                   }
                   if (use_bf16) {
                     convert(std::span<const float>(row),
                             std::span<bfloat16>(w.bf16.data() + r * width, size_t(width)));
                   } else {
                     std::copy(row.begin(), row.end(), w.f32.begin() + r * width);
                   }
                 }
               });
  return w;
}

}  // namespace

float fp8_amax_fast(const float* x, int64_t n) {
  const int64_t chunks = (n + kGrain - 1) / kGrain;
  std::vector<float> partial(static_cast<size_t>(std::max<int64_t>(chunks, 1)), 0.0f);
  parallel_for(n, kGrain, [&](int64_t begin, int64_t end) {
    partial[size_t(begin / kGrain)] = span_amax(x + begin, end - begin);
  });
  float m = 0.0f;
  for (float p : partial) m = combine(m, p);
  return m;
}

void fp8_scale_fast(const float* x, int64_t n, DType fp8, float scale, uint8_t* q) {
  parallel_for(n, kGrain, [&](int64_t begin, int64_t end) {
    encode_span(x + begin, end - begin, fp8, scale, q + begin);
  });
}

void fp8_quantize_mx_fast(const float* x, int64_t rows, int64_t cols, DType fp8, uint8_t* q,
                          uint8_t* codes, MxRounding rounding) {
  const int64_t nb = (cols + kMxBlock - 1) / kMxBlock;
  // Per row: the block codes, then x * 2^-e for the whole row (the reference's one fp32
  // multiply) and one conversion with scale 1, which rounds it as the reference does.
  parallel_for(rows, std::max<int64_t>(1, kGrain / std::max<int64_t>(cols, 1)),
               [&](int64_t begin, int64_t end) {
                 std::vector<float> scaled(static_cast<size_t>(cols));
                 for (int64_t r = begin; r < end; ++r) {
                   const float* xr = x + r * cols;
                   uint8_t* cr = codes + r * nb;
                   for (int64_t b = 0; b < nb; ++b) {
                     const int64_t j0 = b * kMxBlock, j1 = std::min(cols, j0 + kMxBlock);
                     // span_amax is NaN with a NaN and infinite with an infinity: a NaN scale.
                     const float amax = span_amax(xr + j0, j1 - j0);
                     const uint8_t code =
                         std::isfinite(amax) ? mx_scale_code(amax, fp8, rounding) : uint8_t(0xFF);
                     cr[b] = code;
                     const float inverse = code == 0xFF ? 1.0f : std::ldexp(1.0f, 127 - int(code));
                     for (int64_t j = j0; j < j1; ++j) scaled[size_t(j)] = xr[j] * inverse;
                   }
                   encode_span(scaled.data(), cols, fp8, 1.0f, q + r * cols);
                   for (int64_t b = 0; b < nb; ++b) {
                     if (cr[b] != 0xFF) continue;
                     const int64_t j0 = b * kMxBlock, j1 = std::min(cols, j0 + kMxBlock);
                     std::fill(q + r * cols + j0, q + r * cols + j1, uint8_t(0x7F));
                   }
                 }
               });
}

void fp8_quantize_blocks_fast(const float* x, int64_t batch, int64_t rows, int64_t cols,
                              int64_t block_rows, DType fp8, uint8_t* q, float* scale_inv) {
  const int64_t br = (rows + block_rows - 1) / block_rows, bc = (cols + kFp8Block - 1) / kFp8Block;
  const float max = fp8_max(fp8);
  parallel_for(batch * br * bc, 1, [&](int64_t begin, int64_t end) {
    for (int64_t t = begin; t < end; ++t) {
      const int64_t m = t / (br * bc), tr = t / bc % br, tc = t % bc;
      const int64_t r0 = tr * block_rows, r1 = std::min(rows, r0 + block_rows);
      const int64_t c0 = tc * kFp8Block, len = std::min(cols, c0 + kFp8Block) - c0;
      const float* xm = x + m * rows * cols;
      float amax = 0.0f;
      for (int64_t r = r0; r < r1; ++r) amax = combine(amax, span_amax(xm + r * cols + c0, len));
      const float scale = current_scale(amax, max);
      scale_inv[t] = 1.0f / scale;
      for (int64_t r = r0; r < r1; ++r) {
        encode_span(xm + r * cols + c0, len, fp8, scale, q + m * rows * cols + r * cols + c0);
      }
    }
  });
}

void fp8_gemm_fast(int64_t batch, int64_t m, int64_t n, int64_t k, const Fp8Operand& a,
                   const Fp8Operand& b, float* c) {
  const bool use_bf16 = gemm_fast_has_bf16();
  const DType in = use_bf16 ? DType::bf16 : DType::f32;
  const int64_t out = batch * m * n;
  if (a.kind != Fp8Operand::Kind::blocks) {
    const Widened wa = widen(a, batch * m, k, 0, k, use_bf16);
    const Widened wb = widen(b, batch * n, k, 0, k, use_bf16);
    gemm_fast({.batch = batch,
               .m = m,
               .n = n,
               .k = k,
               .trans_b = true,
               .batch_a = batch,
               .batch_b = batch},
              in, wa.data(), wb.data(), c, DType::f32);
    if (a.kind == Fp8Operand::Kind::per_tensor) {
      const float s = a.scale_inv * b.scale_inv;
      parallel_for(out, kGrain, [&](int64_t begin, int64_t end) {
        for (int64_t i = begin; i < end; ++i) c[i] *= s;
      });
    }
    return;
  }
  // Per-block fp32 scales: one GEMM per 128-chunk of k, scaled and summed in fp32.
  std::fill(c, c + out, 0.0f);
  std::vector<float> partial(static_cast<size_t>(out));
  const int64_t bc = (k + kFp8Block - 1) / kFp8Block;
  const int64_t bra = (m + a.block_rows - 1) / a.block_rows;
  const int64_t brb = (n + b.block_rows - 1) / b.block_rows;
  for (int64_t chunk = 0; chunk < bc; ++chunk) {
    const int64_t k0 = chunk * kFp8Block, width = std::min(k, k0 + kFp8Block) - k0;
    const Widened wa = widen(a, batch * m, k, k0, width, use_bf16);
    const Widened wb = widen(b, batch * n, k, k0, width, use_bf16);
    gemm_fast({.batch = batch,
               .m = m,
               .n = n,
               .k = width,
               .trans_b = true,
               .batch_a = batch,
               .batch_b = batch},
              in, wa.data(), wb.data(), partial.data(), DType::f32);
    parallel_for(batch * m, std::max<int64_t>(1, kGrain / std::max<int64_t>(n, 1)),
                 [&](int64_t begin, int64_t end) {
                   for (int64_t r = begin; r < end; ++r) {
                     const int64_t bi = r / m, i = r % m;
                     const float sa = a.block_scale_inv[(bi * bra + i / a.block_rows) * bc + chunk];
                     const float* sb = b.block_scale_inv + bi * brb * bc;
                     for (int64_t j = 0; j < n; ++j) {
                       c[r * n + j] +=
                           partial[size_t(r * n + j)] * (sa * sb[(j / b.block_rows) * bc + chunk]);
                     }
                   }
                 });
  }
}

}  // namespace mixp::kernels
