// The CPU candidates of kernels/permute.h: the blocks split over the threads, and the fallback
// on one thread (the same bytes).
#include "kernels/permute.h"

#include <algorithm>
#include <cstring>

#include "core/parallel.h"

namespace mixp::kernels {
namespace {

template <bool Fallback>
void permute_cpu(const Tensor& x, const std::vector<int>& order, Tensor& out) {
  const int nd = x.ndim();
  std::vector<int64_t> in_strides(static_cast<size_t>(nd), 1);
  for (int d = nd - 2; d >= 0; --d)
    in_strides[size_t(d)] = in_strides[size_t(d + 1)] * x.shape()[d + 1];
  const Shape& out_dims = out.shape();
  // The trailing dimensions that stay in place are contiguous in both tensors: they move as
  // one block of `run` elements.
  int kept = nd;
  int64_t run = 1;
  while (kept > 0 && order[size_t(kept - 1)] == kept - 1) {
    --kept;
    run *= x.shape()[kept];
  }
  const size_t size = size_t(size_of(x.dtype()));
  const size_t run_bytes = size_t(run) * size;
  const int64_t blocks = run == 0 ? 0 : out.numel() / run;
  const char* src = static_cast<const char*>(x.raw_data());
  char* dst = static_cast<char*>(out.raw_data());
  auto copy_blocks = [&](int64_t begin, int64_t end) {
    for (int64_t b = begin; b < end; ++b) {
      int64_t rest = b, offset = 0;
      for (int d = kept - 1; d >= 0; --d) {
        offset += (rest % out_dims[d]) * in_strides[size_t(order[size_t(d)])];
        rest /= out_dims[d];
      }
      std::memcpy(dst + size_t(b) * run_bytes, src + size_t(offset) * size, run_bytes);
    }
  };
  if constexpr (Fallback) {
    copy_blocks(0, blocks);
  } else {
    parallel_for(blocks, std::max<int64_t>(1, 16384 / std::max<int64_t>(run, 1)), copy_blocks);
  }
}

}  // namespace

Kernel<PermuteFn> permute_copy("permute_copy",
                               {{.name = "openmp", .fn = permute_cpu<false>},
                                {.name = "scalar", .fn = permute_cpu<true>, .fallback = true}});

}  // namespace mixp::kernels
