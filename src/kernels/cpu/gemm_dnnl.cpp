// oneDNN matmul (the 2.x API: an op desc, then a primitive desc). oneDNN keeps a cache of
// primitives, so building the primitive for a shape seen before is a lookup.
#include <dnnl.hpp>

#include "kernels/cpu/dnnl_runtime.h"
#include "kernels/gemm.h"
#include "mixp/cpu.h"
#include "mixp/error.h"

namespace mixp::kernels {
namespace {

dnnl::memory::desc matrix(bool batched, int64_t batch, int64_t rows, int64_t cols, bool transposed,
                          dnnl::memory::data_type dt) {
  // Logical [batch, rows, cols]; a transposed matrix is stored [cols, rows]. Unbatched products
  // use 2-D descriptors, for which oneDNN picks its faster plain-matrix kernels.
  if (!batched) {
    const dnnl::memory::dims strides =
        transposed ? dnnl::memory::dims{1, rows} : dnnl::memory::dims{cols, 1};
    return dnnl::memory::desc({rows, cols}, dt, strides);
  }
  const dnnl::memory::dims dims = {batch, rows, cols};
  const dnnl::memory::dims strides = transposed ? dnnl::memory::dims{rows * cols, 1, rows}
                                                : dnnl::memory::dims{rows * cols, cols, 1};
  return dnnl::memory::desc(dims, dt, strides);
}

}  // namespace

bool gemm_fast_has_bf16() { return best_isa() >= Isa::avx512_bf16; }

void gemm_fast(const GemmShape& s, DType in, const void* a, const void* b, float* c) {
  MIXP_ASSERT(in == DType::f32 || (in == DType::bf16 && gemm_fast_has_bf16()), "gemm_fast on ",
              name_of(in));
  if (s.m == 0 || s.n == 0 || s.batch == 0) return;
  if (s.k == 0) {
    for (int64_t i = 0; i < s.batch * s.m * s.n; ++i) c[i] = 0.0f;
    return;
  }
  using dt = dnnl::memory::data_type;
  const dt in_type = in == DType::bf16 ? dt::bf16 : dt::f32;
  DnnlRuntime& r = dnnl_runtime();
  try {
    const bool batched = s.batch > 1;
    const auto a_md = matrix(batched, s.batch_a, s.m, s.k, s.trans_a, in_type);
    const auto b_md = matrix(batched, s.batch_b, s.k, s.n, s.trans_b, in_type);
    const auto c_md = matrix(batched, s.batch, s.m, s.n, false, dt::f32);
    const dnnl::matmul::primitive_desc pd(dnnl::matmul::desc(a_md, b_md, c_md), r.engine);
    dnnl::memory a_mem(a_md, r.engine, const_cast<void*>(a));
    dnnl::memory b_mem(b_md, r.engine, const_cast<void*>(b));
    dnnl::memory c_mem(c_md, r.engine, c);
    dnnl::matmul(pd).execute(
        r.stream, {{DNNL_ARG_SRC, a_mem}, {DNNL_ARG_WEIGHTS, b_mem}, {DNNL_ARG_DST, c_mem}});
    r.stream.wait();
  } catch (const dnnl::error& e) {
    MIXP_ASSERT(false, "oneDNN matmul failed (", e.what(), ") for batch ", s.batch, " m ", s.m,
                " n ", s.n, " k ", s.k);
  }
}

}  // namespace mixp::kernels
