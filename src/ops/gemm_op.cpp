#include "ops/gemm_op.h"

#include "ops/op_helpers.h"

namespace mixp::ops::detail {

Tensor gemm(const kernels::GemmShape& s, const Tensor& a, const Tensor& b, const Shape& out_shape,
            DType out_dtype, const Tensor& bias) {
  NoGradGuard no_grad;
  const DType in = a.dtype();
  const DType acc = in == DType::f64 ? DType::f64 : DType::f32;
  const bool direct = out_dtype == acc;
  Tensor c = direct ? empty(out_shape, acc) : empty(out_shape, acc, MemoryTag::workspace);
  if (reference_mode() || in == DType::f64) {
    kernels::gemm_reference(s, in, a.raw_data(), b.raw_data(), c.raw_data());
  } else if (in == DType::f32 || (in == DType::bf16 && kernels::gemm_fast_has_bf16())) {
    kernels::gemm_fast(s, in, a.raw_data(), b.raw_data(), c.data<float>());
  } else {
    const Tensor wa = a.to(DType::f32), wb = b.to(DType::f32);
    kernels::gemm_fast(s, DType::f32, wa.raw_data(), wb.raw_data(), c.data<float>());
  }
  if (bias.defined()) {
    const Tensor wide_bias = bias.to(acc);
    const int64_t n = s.n, rows = c.numel() / std::max<int64_t>(n, 1);
    auto add_rows = [&]<typename T>() {
      T* out = c.data<T>();
      const T* bv = wide_bias.data<T>();
      kernels::parallel_for(rows, std::max<int64_t>(1, 16384 / std::max<int64_t>(n, 1)),
                            [&](int64_t begin, int64_t end) {
                              for (int64_t r = begin; r < end; ++r) {
                                for (int64_t j = 0; j < n; ++j) out[r * n + j] += bv[j];
                              }
                            });
    };
    if (acc == DType::f64)
      add_rows.operator()<double>();
    else
      add_rows.operator()<float>();
  }
  return direct ? c : c.to(out_dtype).detach();
}

}  // namespace mixp::ops::detail
