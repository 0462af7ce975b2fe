#include "ops/gemm_op.h"

#include <algorithm>

#include "ops/op_helpers.h"

namespace mixp::ops::detail {

namespace {

// op(a) op(b) (+ bias) into c: contiguous, of the result's size, in the accumulation dtype.
void product_into(const kernels::GemmShape& s, const Tensor& a, const Tensor& b, const Tensor& bias,
                  Tensor c) {
  const DType in = a.dtype();
  const DType acc = c.dtype();
  const Tensor wide_bias = bias.defined() ? bias.to(acc) : Tensor();
  if (reference_mode() || in == DType::f64) {
    kernels::gemm_reference(s, in, a.raw_data(), b.raw_data(), c.raw_data());
  } else {
    // oneDNN adds the bias itself, in the same pass (a separate pass over C cost about 1% of a
    // gpt step).
    const float* bias_data = wide_bias.defined() ? wide_bias.data<float>() : nullptr;
    if (in == DType::f32 || (in == DType::bf16 && kernels::gemm_fast_has_bf16())) {
      kernels::gemm_fast(s, in, a.raw_data(), b.raw_data(), c.data<float>(), DType::f32, bias_data);
    } else {
      const Tensor wa = a.to(DType::f32), wb = b.to(DType::f32);
      kernels::gemm_fast(s, DType::f32, wa.raw_data(), wb.raw_data(), c.data<float>(), DType::f32,
                         bias_data);
    }
    return;
  }
  if (wide_bias.defined()) {
    const int64_t n = s.n, rows = c.numel() / std::max<int64_t>(n, 1);
    auto add_rows = [&]<typename T>() {
      T* out = c.data<T>();
      const T* bv = wide_bias.data<T>();
      for (int64_t r = 0; r < rows; ++r) {
        for (int64_t j = 0; j < n; ++j) out[r * n + j] += bv[j];
      }
    };
    if (acc == DType::f64)
      add_rows.operator()<double>();
    else
      add_rows.operator()<float>();
  }
}

// Rows of C computed per pass when mixp rounds C to a narrower dtype: the fp32 product then exists
// for one block of at most about 8 MiB at a time, not whole (a bf16 gpt step's peak held the
// fp32 product of its widest layer, 24 MiB, beside that layer's bf16 result). The blocks are
// of equal size, in multiples of 64 rows, and as few as the bound allows: smaller ones made
// the gpt step slower (more calls, each repacking B). Each element's sum is the same either way.
int64_t rows_per_block(const kernels::GemmShape& s) {
  constexpr int64_t kBlockBytes = int64_t(8) << 20;
  const int64_t bytes = s.m * std::max<int64_t>(s.n, 1) * int64_t(sizeof(float));
  const int64_t blocks = (bytes + kBlockBytes - 1) / kBlockBytes;
  const int64_t rows = (s.m + blocks - 1) / std::max<int64_t>(blocks, 1);
  return (rows + 63) / 64 * 64;
}

}  // namespace

void gemm_into(const kernels::GemmShape& s, const Tensor& a, const Tensor& b, Tensor out,
               const Tensor& bias) {
  NoGradGuard no_grad;
  const DType acc = a.dtype() == DType::f64 ? DType::f64 : DType::f32;
  MIXP_ASSERT(out.numel() == s.batch * s.m * s.n, "gemm_into: an output of ", out.numel(),
              " elements for a product of ", s.batch * s.m * s.n);
  if (out.dtype() == acc) {
    product_into(s, a, b, bias, out);
    return;
  }
  // A bf16 product into a bf16 result is rounded as the product stores its fp32 sums: one pass
  // over a result half the size, where rounding here would read the sums back and write them
  // again (about 5% of a bf16 gpt step). Both round to nearest even; oneDNN flushes fp32
  // subnormal sums to zero, as vdpbf16ps flushes every partial sum before them, and mixp's pair
  // tiles keep them (docs/formats.md).
  const bool rounded_in_product = out.dtype() == DType::bf16 && a.dtype() == DType::bf16 &&
                                  !reference_mode() && kernels::gemm_fast_has_bf16();
  const Tensor wide_bias = rounded_in_product && bias.defined() ? bias.to(DType::f32) : Tensor();
  // From kPairTileMinRows rows on, mixp's own pair tiles do the product and its rounding:
  // 0.86-0.99x oneDNN's time on gpt's linear layers, and about 9% off the step
  // (docs/performance.md, "The pair tiles"). oneDNN does the rest.
  constexpr int64_t kPairTileMinRows = 512;
  if (rounded_in_product && s.m >= kPairTileMinRows && kernels::matmul_pairs_supported(s)) {
    const int threads = num_threads();
    Tensor space =
        empty(Shape{kernels::matmul_pairs_workspace_bytes(s)}, DType::u8, MemoryTag::workspace);
    kernels::matmul_pairs_bf16(s, a.raw_data(), b.raw_data(), out.raw_data(),
                               wide_bias.defined() ? wide_bias.data<float>() : nullptr,
                               space.data<uint8_t>(), threads);
    return;
  }
  auto block = [&](const kernels::GemmShape& part, const Tensor& a_part, Tensor out_part) {
    if (rounded_in_product) {
      kernels::gemm_fast(part, DType::bf16, a_part.raw_data(), b.raw_data(), out_part.raw_data(),
                         DType::bf16, wide_bias.defined() ? wide_bias.data<float>() : nullptr);
      return;
    }
    const Tensor c = empty(out_part.shape(), acc, MemoryTag::workspace);
    product_into(part, a_part, b, bias, c);
    out_part.copy_(c);
  };
  // oneDNN's rounding needs no fp32 block of ours: the product goes whole, one parallel region
  // instead of three for gpt's widest layers (each region wakes the sleeping worker: measured
  // about 2% of a gpt amp-bf16 step against the 8 MiB blocks).
  const int64_t rows = rounded_in_product ? s.m : rows_per_block(s);
  if (s.batch != 1 || s.trans_a || rows >= s.m) {
    block(s, a, out);
    return;
  }
  // Rows of A (stored [m, k]) and of C are contiguous: block by block.
  const Tensor a2 = a.view(Shape{s.m, s.k}), out2 = out.view(Shape{s.m, s.n});
  for (int64_t begin = 0; begin < s.m; begin += rows) {
    kernels::GemmShape part = s;
    part.m = std::min(rows, s.m - begin);
    block(part, a2.slice(begin, begin + part.m), out2.slice(begin, begin + part.m));
  }
}

Tensor gemm(const kernels::GemmShape& s, const Tensor& a, const Tensor& b, const Shape& out_shape,
            DType out_dtype, const Tensor& bias) {
  Tensor out = empty(out_shape, out_dtype);
  gemm_into(s, a, b, out, bias);
  return out;
}

}  // namespace mixp::ops::detail
