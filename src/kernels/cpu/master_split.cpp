// The CPU candidates of kernels/master_split.h's tensor kernels: the AVX-512 split and join
// (kernels/cpu/master_split_avx512.cpp) and the scalar ones (kernels/ref/master_split_ref.cpp),
// which give the same bits.
#include "kernels/master_split.h"

#include "mixp/error.h"

namespace mixp::kernels {
namespace {

void check(const char* kernel, const Tensor& master, const Tensor& param, const Tensor& low) {
  const int64_t n = param.numel();
  MIXP_CHECK(param.dtype() == DType::bf16 && master.dtype() == DType::f32 &&
                 low.dtype() == DType::u8 && master.numel() == n &&
                 low.numel() == 2 * n + (n + 7) / 8,
             kernel, ": expected a bf16 parameter of n elements, an f32 master of n and a u8 ",
             "master_low of 2n + ceil(n / 8), got ", name_of(param.dtype()), " of ", n, ", ",
             name_of(master.dtype()), " of ", master.numel(), " and ", name_of(low.dtype()),
             " of ", low.numel());
}

template <bool Avx512>
void join_cpu(const Tensor& param, const Tensor& master_low, Tensor& master) {
  check("join_bf16_master", master, param, master_low);
  const int64_t n = param.numel();
  const auto* p = static_cast<const uint16_t*>(param.raw_data());
  const auto* low = master_low.data<uint8_t>();
  const auto* low16 = reinterpret_cast<const uint16_t*>(low);
  if constexpr (Avx512) {
    avx512::join_master_bf16(p, low16, low + 2 * n, n, master.data<float>());
  } else {
    ref::join_master_bf16(p, low16, low + 2 * n, n, master.data<float>());
  }
}

template <bool Avx512>
void split_cpu(const Tensor& master, Tensor& param, Tensor& master_low) {
  check("split_bf16_master", master, param, master_low);
  const int64_t n = param.numel();
  auto* p = static_cast<uint16_t*>(param.raw_data());
  auto* low = master_low.data<uint8_t>();
  auto* low16 = reinterpret_cast<uint16_t*>(low);
  if constexpr (Avx512) {
    avx512::split_master_bf16(master.data<float>(), n, p, low16, low + 2 * n);
  } else {
    ref::split_master_bf16(master.data<float>(), n, p, low16, low + 2 * n);
  }
}

}  // namespace

Kernel<JoinBf16MasterFn> join_bf16_master(
    "join_bf16_master", {{.name = "avx512", .isa = Isa::avx512, .fn = join_cpu<true>},
                         {.name = "scalar", .fn = join_cpu<false>, .fallback = true}});

Kernel<SplitBf16MasterFn> split_bf16_master(
    "split_bf16_master", {{.name = "avx512", .isa = Isa::avx512, .fn = split_cpu<true>},
                          {.name = "scalar", .fn = split_cpu<false>, .fallback = true}});

}  // namespace mixp::kernels
