// The CPU candidates of kernels/round_to_f16.h: each value on its own, in chunks over the
// threads (a pass over memory, which one core does not fill).
#include "kernels/round_to_f16.h"

#include "kernels/convert_kernels.h"
#include "kernels/cpu/parallel.h"
#include "mixp/error.h"

namespace mixp::kernels {
namespace {

constexpr int64_t kChunk = int64_t(1) << 16;

template <F32ToF32Fn round_range>
void in_chunks(const Tensor& src, Tensor& dst) {
  MIXP_CHECK(src.dtype() == DType::f32 && dst.dtype() == DType::f32, "round_to_f16_values: f32 ",
             "tensors only, got ", name_of(src.dtype()), " into ", name_of(dst.dtype()));
  MIXP_CHECK(src.numel() == dst.numel(), "round_to_f16_values: ", src.numel(),
             " elements into ", dst.numel());
  const float* in = src.data<float>();
  float* out = dst.data<float>();
  parallel_for(src.numel(), kChunk, [&](int64_t begin, int64_t end) {
    round_range(in + begin, out + begin, size_t(end - begin));
  });
}

}  // namespace

Kernel<RoundToF16ValuesFn> round_to_f16_values(
    "round_to_f16_values",
    {{.name = "avx512", .isa = Isa::avx512, .fn = in_chunks<avx512::f32_round_to_f16>},
     {.name = "scalar", .fn = in_chunks<ref::f32_round_to_f16>, .fallback = true}});

}  // namespace mixp::kernels
