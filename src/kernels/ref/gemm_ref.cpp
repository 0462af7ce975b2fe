// Reference batched matrix product: the textbook triple loop, accumulating in double.
#include "kernels/gemm.h"
#include "tensor/element.h"

namespace mixp::kernels {

void gemm_reference(const GemmShape& s, DType in, const void* a, const void* b, void* c) {
  const int64_t a_size = s.m * s.k, b_size = s.k * s.n;
  for (int64_t bi = 0; bi < s.batch; ++bi) {
    const int64_t a_base = (s.batch_a == 1 ? 0 : bi) * a_size;
    const int64_t b_base = (s.batch_b == 1 ? 0 : bi) * b_size;
    for (int64_t i = 0; i < s.m; ++i) {
      for (int64_t j = 0; j < s.n; ++j) {
        double acc = 0;
        for (int64_t p = 0; p < s.k; ++p) {
          const int64_t ai = a_base + (s.trans_a ? p * s.m + i : i * s.k + p);
          const int64_t bj = b_base + (s.trans_b ? j * s.k + p : p * s.n + j);
          acc += load_element(a, in, ai) * load_element(b, in, bj);
        }
        const int64_t ci = (bi * s.m + i) * s.n + j;
        if (in == DType::f64)
          static_cast<double*>(c)[ci] = acc;
        else
          static_cast<float*>(c)[ci] = float(acc);
      }
    }
  }
}

}  // namespace mixp::kernels
