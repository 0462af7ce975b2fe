// The CPU candidates of kernels/fp8_quantize.h: kernels/fp8.h's fast kernels (threads and
// vectorized conversions; oneDNN for the GEMM), and the scalar references as the fallbacks.
#include "kernels/fp8_quantize.h"

#include "mixp/error.h"

namespace mixp::kernels {
namespace {

const float* floats(const Tensor& x, const char* kernel) {
  MIXP_CHECK(x.dtype() == DType::f32, kernel, ": the input must be f32, got ",
             name_of(x.dtype()));
  return x.data<float>();
}

uint8_t* codes_of(Tensor& q, const char* kernel) {
  MIXP_CHECK(q.dtype() == DType::e4m3 || q.dtype() == DType::e5m2, kernel,
             ": the output must be e4m3 or e5m2, got ", name_of(q.dtype()));
  return static_cast<uint8_t*>(q.raw_data());
}

float amax_fast(const Tensor& x) { return fp8_amax_fast(floats(x, "fp8_amax"), x.numel()); }
float amax_reference(const Tensor& x) {
  return fp8_amax_reference(floats(x, "fp8_amax"), x.numel());
}

template <bool Fast>
void scale_cpu(const Tensor& x, float scale, Tensor& q) {
  const float* xs = floats(x, "fp8_scale");
  uint8_t* qs = codes_of(q, "fp8_scale");
  MIXP_CHECK(q.numel() == x.numel(), "fp8_scale: ", x.numel(), " inputs and ", q.numel(),
             " outputs");
  Fast ? fp8_scale_fast(xs, x.numel(), q.dtype(), scale, qs)
       : fp8_scale_reference(xs, x.numel(), q.dtype(), scale, qs);
}

template <bool Fast>
void mx_cpu(const Tensor& x, int64_t rows, int64_t cols, MxRounding rounding, Tensor& q,
            Tensor& codes) {
  const float* xs = floats(x, "fp8_quantize_mx");
  uint8_t* qs = codes_of(q, "fp8_quantize_mx");
  MIXP_CHECK(x.numel() == rows * cols && q.numel() == rows * cols && codes.dtype() == DType::u8 &&
                 codes.numel() == rows * ((cols + kMxBlock - 1) / kMxBlock),
             "fp8_quantize_mx: sizes do not match a [", rows, ", ", cols, "] matrix");
  Fast ? fp8_quantize_mx_fast(xs, rows, cols, q.dtype(), qs, codes.data<uint8_t>(), rounding)
       : fp8_quantize_mx_reference(xs, rows, cols, q.dtype(), qs, codes.data<uint8_t>(),
                                   rounding);
}

template <bool Fast>
void blocks_cpu(const Tensor& x, int64_t batch, int64_t rows, int64_t cols, int64_t block_rows,
                Tensor& q, Tensor& scale_inv) {
  const float* xs = floats(x, "fp8_quantize_blocks");
  uint8_t* qs = codes_of(q, "fp8_quantize_blocks");
  const int64_t tiles =
      batch * ((rows + block_rows - 1) / block_rows) * ((cols + kFp8Block - 1) / kFp8Block);
  MIXP_CHECK(x.numel() == batch * rows * cols && q.numel() == x.numel() &&
                 scale_inv.dtype() == DType::f32 && scale_inv.numel() == tiles,
             "fp8_quantize_blocks: sizes do not match ", batch, " matrices [", rows, ", ", cols,
             "] in tiles of ", block_rows, " x ", kFp8Block);
  float* s = scale_inv.data<float>();
  Fast ? fp8_quantize_blocks_fast(xs, batch, rows, cols, block_rows, q.dtype(), qs, s)
       : fp8_quantize_blocks_reference(xs, batch, rows, cols, block_rows, q.dtype(), qs, s);
}

Fp8Operand operand(const Fp8Matrix& t) {
  Fp8Operand op;
  op.data = static_cast<const uint8_t*>(t.codes.raw_data());
  op.dtype = t.codes.dtype();
  op.kind = t.kind;
  op.scale_inv = t.scale_inv;
  if (t.kind == Fp8Operand::Kind::mx) op.codes = t.block_scales.data<uint8_t>();
  if (t.kind == Fp8Operand::Kind::blocks) op.block_scale_inv = t.block_scales.data<float>();
  op.block_rows = t.block_rows;
  return op;
}

template <bool Fast>
void gemm_cpu(const Fp8Matrix& a, const Fp8Matrix& b, int64_t batch, int64_t m, int64_t n,
              int64_t k, Tensor& c) {
  MIXP_CHECK(c.dtype() == DType::f32 && c.numel() == batch * m * n,
             "fp8_scaled_gemm: the output must be f32 of ", batch * m * n, " elements");
  const Fp8Operand oa = operand(a), ob = operand(b);
  Fast ? fp8_gemm_fast(batch, m, n, k, oa, ob, c.data<float>())
       : fp8_gemm_reference(batch, m, n, k, oa, ob, c.data<float>());
}

void dequantize_cpu(const Fp8Matrix& q, int64_t batch, int64_t rows, int64_t k, Tensor& out) {
  MIXP_CHECK(out.dtype() == DType::f32 && out.numel() == batch * rows * k &&
                 q.codes.numel() == out.numel(),
             "fp8_dequantize: ", q.codes.numel(), " codes into ", out.numel(), " ",
             name_of(out.dtype()), " values of ", batch, " matrices [", rows, ", ", k, "]");
  const Fp8Operand op = operand(q);
  float* o = out.data<float>();
  for (int64_t b = 0; b < batch; ++b)
    for (int64_t r = 0; r < rows; ++r)
      for (int64_t c = 0; c < k; ++c)
        o[(b * rows + r) * k + c] = fp8_operand_value(op, rows, k, b, r, c);
}

}  // namespace

Kernel<Fp8AmaxFn> fp8_amax("fp8_amax",
                           {{.name = "openmp", .fn = amax_fast},
                            {.name = "scalar", .fn = amax_reference, .fallback = true}});

Kernel<Fp8ScaleFn> fp8_scale("fp8_scale",
                             {{.name = "openmp", .fn = scale_cpu<true>},
                              {.name = "scalar", .fn = scale_cpu<false>, .fallback = true}});

Kernel<Fp8QuantizeMxFn> fp8_quantize_mx(
    "fp8_quantize_mx", {{.name = "openmp", .fn = mx_cpu<true>},
                        {.name = "scalar", .fn = mx_cpu<false>, .fallback = true}});

Kernel<Fp8QuantizeBlocksFn> fp8_quantize_blocks(
    "fp8_quantize_blocks", {{.name = "openmp", .fn = blocks_cpu<true>},
                            {.name = "scalar", .fn = blocks_cpu<false>, .fallback = true}});

Kernel<Fp8DequantizeFn> fp8_dequantize(
    "fp8_dequantize", {{.name = "scalar", .fn = dequantize_cpu, .fallback = true}});

Kernel<Fp8GemmFn> fp8_scaled_gemm(
    "fp8_scaled_gemm", {{.name = "onednn", .fn = gemm_cpu<true>},
                        {.name = "reference", .fn = gemm_cpu<false>, .fallback = true}});

}  // namespace mixp::kernels
