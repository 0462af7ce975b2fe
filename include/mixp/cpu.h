// mixp/cpu.h — what this CPU can do, and which instruction sets mixp's kernels may use.
//
// Kernels are chosen at run time: each has a portable scalar version and, where it pays,
// versions for AVX2 (with F16C and FMA), AVX-512 (F, BW, VL, DQ) and AVX-512 BF16. The active
// ISA is the best one the CPU and the operating system support, lowered by an IsaLimit scope.
// Every path gives identical bits; IsaLimit is how tests and benchmarks compare them.
//
// Example:
//
//   std::printf("best: %s\n", mixp::name_of(mixp::best_isa()));    // "avx512_bf16"
//   {
//     mixp::IsaLimit only_scalar(mixp::Isa::scalar);               // this thread, this scope
//     mixp::convert(src, dst);                                     // runs the scalar kernel
//   }
#pragma once

#include <cstdint>
#include <string_view>

namespace mixp {

/// Instruction-set levels, each a superset of the one before.
enum class Isa : uint8_t {
  scalar = 0,       ///< portable C++; the reference path
  avx2 = 1,         ///< AVX2 + FMA + F16C
  avx512 = 2,       ///< AVX-512 F, BW, VL, DQ
  avx512_bf16 = 3,  ///< AVX-512 plus the BF16 conversions and dot products
};
inline constexpr Isa kAllIsas[] = {Isa::scalar, Isa::avx2, Isa::avx512, Isa::avx512_bf16};

struct CpuFeatures {
  bool avx2 = false, fma = false, f16c = false;
  bool avx512f = false, avx512bw = false, avx512vl = false, avx512dq = false;
  bool avx512_bf16 = false;
  bool avx512_fp16 = false;
};

/// The features of this CPU that the operating system also enables (XSAVE state checked).
const CpuFeatures& cpu_features();
/// The best ISA level this machine supports.
Isa best_isa();
/// The ISA kernels use now, on this thread: best_isa() lowered by the innermost IsaLimit.
Isa active_isa();

const char* name_of(Isa isa);
/// "scalar", "avx2", "avx512" or "avx512_bf16"; throws mixp::Error otherwise.
Isa parse_isa(std::string_view name);

/// Caps the ISA for kernels started on this thread while the scope lives. Scopes nest; an inner
/// scope can only lower the cap. Asking for more than the CPU has is allowed and has no effect.
class IsaLimit {
 public:
  explicit IsaLimit(Isa max);
  ~IsaLimit();
  IsaLimit(const IsaLimit&) = delete;
  IsaLimit& operator=(const IsaLimit&) = delete;

 private:
  Isa previous_;
};

}  // namespace mixp
