// The CPU candidates of kernels/fp4_quantize.h.
#include "kernels/fp4_quantize.h"

#include <algorithm>

#include "core/parallel.h"
#include "kernels/gemm.h"
#include "mixp/error.h"

namespace mixp::kernels {
namespace {

enum class Encode { avx512, scalar_rows, reference };

template <Encode How>
void quantize_cpu(const Tensor& x, int64_t rows, int64_t cols, const Fp4Params& params,
                  Tensor& packed, Tensor& scales) {
  MIXP_CHECK(x.dtype() == DType::f32 && x.numel() == rows * cols, "fp4_quantize: expected ",
             rows * cols, " f32 values, got ", x.numel(), " ", name_of(x.dtype()));
  const int64_t block = fp4_block(params.kind);
  MIXP_CHECK(packed.dtype() == DType::u8 && packed.numel() == rows * ((cols + 1) / 2) &&
                 scales.dtype() == DType::u8 &&
                 scales.numel() == (rows + params.block_rows - 1) / params.block_rows *
                                       ((cols + block - 1) / block),
             "fp4_quantize: the packed codes or scales do not fit a [", rows, ", ", cols,
             "] matrix");
  const float* xs = x.data<float>();
  if constexpr (How == Encode::reference)
    fp4_quantize_reference(xs, rows, cols, params, packed.data<uint8_t>(), scales.data<uint8_t>());
  else
    fp4_quantize_fast(xs, rows, cols, params, packed.data<uint8_t>(), scales.data<uint8_t>(),
                      How == Encode::avx512);
}

// The exact block products of an FP4 operand as a [rows, cols] tensor of `dtype` (bf16 or f32).
Tensor block_values(const Fp4Matrix& q, DType dtype) {
  Tensor out = empty({q.rows, q.cols}, dtype, MemoryTag::workspace);
  fp4_block_values(q.packed.data<uint8_t>(), q.scales.data<uint8_t>(), q.rows, q.cols, q.kind,
                   q.block_rows, dtype == DType::bf16, out.raw_data());
  return out;
}

void scale_sums(Tensor& c, float global) {
  if (global == 1.0f) return;  // x * 1 is x, NaN's payload and all
  float* v = c.data<float>();
  const int64_t n = c.numel();
  for (int64_t i = 0; i < n; ++i) v[i] *= global;
}

enum class Sum { onednn_bf16, onednn_f32, reference };

template <Sum How>
void gemm_cpu(const Fp4Matrix& a, const Fp4Matrix& b, float global, Tensor& c) {
  MIXP_CHECK(a.cols == b.cols && c.dtype() == DType::f32 && c.numel() == a.rows * b.rows,
             "fp4_block_gemm: A [", a.rows, ", ", a.cols, "] and B [", b.rows, ", ", b.cols,
             "] into ", c.numel(), " ", name_of(c.dtype()));
  const DType in = How == Sum::onednn_bf16 ? DType::bf16 : DType::f32;
  const Tensor va = block_values(a, in), vb = block_values(b, in);
  const GemmShape shape{.m = a.rows, .n = b.rows, .k = a.cols, .trans_b = true};
  if constexpr (How == Sum::reference) {
    gemm_reference(shape, in, va.raw_data(), vb.raw_data(), c.raw_data());
  } else {
    gemm_fast(shape, in, va.raw_data(), vb.raw_data(), c.raw_data(), DType::f32);
  }
  scale_sums(c, global);
}

void dequantize_cpu(const Fp4Matrix& q, float tensor_scale, Tensor& out) {
  MIXP_CHECK(out.dtype() == DType::f32 && out.numel() == q.rows * q.cols,
             "fp4_dequantize: ", out.numel(), " ", name_of(out.dtype()),
             " values cannot hold a [", q.rows, ", ", q.cols, "] matrix of f32");
  fp4_dequantize_rows(q.packed.data<uint8_t>(), q.scales.data<uint8_t>(), q.rows, q.cols, q.kind,
                      tensor_scale, q.block_rows, out.data<float>());
}

void transpose_cpu(const Fp4Matrix& q, Fp4Matrix& t) {
  const int64_t block = fp4_block(q.kind);
  MIXP_CHECK(q.block_rows == block && t.rows == q.cols && t.cols == q.rows && t.kind == q.kind &&
                 t.packed.numel() == t.rows * ((t.cols + 1) / 2) &&
                 t.scales.numel() == q.scales.numel(),
             "fp4_transpose: the transpose of a [", q.rows, ", ", q.cols,
             "] matrix in square tiles does not fit [", t.rows, ", ", t.cols, "]");
  fp4_transpose_tiled(q.packed.data<uint8_t>(), q.scales.data<uint8_t>(), q.rows, q.cols, block,
                      t.packed.data<uint8_t>(), t.scales.data<uint8_t>());
}

void hadamard16_cpu(const Tensor& x, const std::array<float, 16>& signs, Tensor& out) {
  const int64_t rows = x.size(0), cols = x.size(1), padded = (cols + 15) / 16 * 16;
  MIXP_CHECK(x.dtype() == DType::f32 && out.dtype() == DType::f32 &&
                 out.numel() == rows * padded,
             "hadamard16: expected f32 [", rows, ", ", cols, "] into f32 [", rows, ", ", padded,
             "]");
  const float* src = x.data<float>();
  float* dst = out.data<float>();
  for (int64_t r = 0; r < rows; ++r) {
    std::copy(src + r * cols, src + (r + 1) * cols, dst + r * padded);
    std::fill(dst + r * padded + cols, dst + (r + 1) * padded, 0.0f);
  }
  hadamard16_rows(dst, rows, padded, signs.data());
}

template <typename... T>
bool cpu_has_bf16_gemm(const T&...) {
  return gemm_fast_has_bf16();
}

void check_product(const Tensor& a, const Tensor& b, const Tensor& c) {
  MIXP_CHECK(a.dtype() == DType::bf16 && b.dtype() == DType::bf16 && a.ndim() == 2 &&
                 b.ndim() == 2 && a.size(1) == b.size(1) && c.dtype() == DType::f32 &&
                 c.numel() == a.size(0) * b.size(0),
             "bf16_product: expected bf16 A [m, k] and B [n, k] into f32 [m, n]");
}

void product_onednn(const Tensor& a, const Tensor& b, Tensor& c) {
  check_product(a, b, c);
  const GemmShape shape{.m = a.size(0), .n = b.size(0), .k = a.size(1), .trans_b = true};
  gemm_fast(shape, DType::bf16, a.raw_data(), b.raw_data(), c.raw_data(), DType::f32);
}

void product_reference(const Tensor& a, const Tensor& b, Tensor& c) {
  check_product(a, b, c);
  const GemmShape shape{.m = a.size(0), .n = b.size(0), .k = a.size(1), .trans_b = true};
  const Tensor fa = a.to(DType::f32), fb = b.to(DType::f32);
  gemm_reference(shape, DType::f32, fa.raw_data(), fb.raw_data(), c.raw_data());
}

}  // namespace

Kernel<Fp4QuantizeFn> fp4_quantize(
    "fp4_quantize",
    {{.name = "avx512", .isa = Isa::avx512, .fn = quantize_cpu<Encode::avx512>},
     {.name = "openmp", .fn = quantize_cpu<Encode::scalar_rows>},
     {.name = "scalar", .fn = quantize_cpu<Encode::reference>, .fallback = true}});

Kernel<Fp4DequantizeFn> fp4_dequantize(
    "fp4_dequantize", {{.name = "scalar", .fn = dequantize_cpu, .fallback = true}});

Kernel<Fp4TransposeFn> fp4_transpose(
    "fp4_transpose", {{.name = "scalar", .fn = transpose_cpu, .fallback = true}});

Kernel<Hadamard16Fn> hadamard16("hadamard16",
                                {{.name = "openmp", .fn = hadamard16_cpu, .fallback = true}});

Kernel<Fp4GemmFn> fp4_block_gemm(
    "fp4_block_gemm",
    {{.name = "onednn_bf16", .applies = cpu_has_bf16_gemm, .fn = gemm_cpu<Sum::onednn_bf16>},
     {.name = "onednn", .fn = gemm_cpu<Sum::onednn_f32>},
     {.name = "reference", .fn = gemm_cpu<Sum::reference>, .fallback = true}});

Kernel<Bf16ProductFn> bf16_product(
    "bf16_product",
    {{.name = "onednn_bf16", .applies = cpu_has_bf16_gemm, .fn = product_onednn},
     {.name = "reference", .fn = product_reference, .fallback = true}});

}  // namespace mixp::kernels
