#include "mixp/cpu.h"

#include <string>

#include "core/choice_context.h"
#include "mixp/error.h"

#if defined(__x86_64__) || defined(__i386__)
#include <cpuid.h>
#define MIXP_X86 1
#endif

namespace mixp {
namespace {

#ifdef MIXP_X86
uint64_t read_xcr0() {
  uint32_t eax = 0, edx = 0;
  __asm__ volatile("xgetbv" : "=a"(eax), "=d"(edx) : "c"(0));
  return (uint64_t(edx) << 32) | eax;
}

CpuFeatures detect() {
  CpuFeatures f;
  unsigned eax = 0, ebx = 0, ecx = 0, edx = 0;
  if (!__get_cpuid(1, &eax, &ebx, &ecx, &edx)) return f;
  const bool osxsave = (ecx >> 27) & 1u;
  const bool fma = (ecx >> 12) & 1u;
  const bool f16c = (ecx >> 29) & 1u;
  if (!osxsave) return f;
  const uint64_t xcr0 = read_xcr0();
  const bool os_avx = (xcr0 & 0x6) == 0x6;                 // XMM and YMM state
  const bool os_avx512 = os_avx && (xcr0 & 0xe0) == 0xe0;  // opmask, ZMM_Hi256, Hi16_ZMM
  if (!os_avx) return f;

  unsigned max_leaf = __get_cpuid_max(0, nullptr);
  if (max_leaf < 7) return f;
  __cpuid_count(7, 0, eax, ebx, ecx, edx);
  f.avx2 = (ebx >> 5) & 1u;
  f.fma = fma;
  f.f16c = f16c;
  if (os_avx512) {
    f.avx512f = (ebx >> 16) & 1u;
    f.avx512dq = (ebx >> 17) & 1u;
    f.avx512bw = (ebx >> 30) & 1u;
    f.avx512vl = (ebx >> 31) & 1u;
    f.avx512_fp16 = (edx >> 23) & 1u;
    unsigned eax1 = 0, ebx1 = 0, ecx1 = 0, edx1 = 0;
    __cpuid_count(7, 1, eax1, ebx1, ecx1, edx1);
    f.avx512_bf16 = (eax1 >> 5) & 1u;
  }
  return f;
}
#else
CpuFeatures detect() { return {}; }
#endif

Isa detect_best() {
  const CpuFeatures& f = cpu_features();
  if (!(f.avx2 && f.fma && f.f16c)) return Isa::scalar;
  if (!(f.avx512f && f.avx512bw && f.avx512vl && f.avx512dq)) return Isa::avx2;
  if (!f.avx512_bf16) return Isa::avx512;
  return Isa::avx512_bf16;
}

thread_local Isa t_isa_cap = Isa::avx512_bf16;
thread_local int t_reference_depth = 0;

}  // namespace

const CpuFeatures& cpu_features() {
  static const CpuFeatures features = detect();
  return features;
}

Isa best_isa() {
  static const Isa best = detect_best();
  return best;
}

Isa active_isa() { return t_isa_cap < best_isa() ? t_isa_cap : best_isa(); }

const char* name_of(Isa isa) {
  switch (isa) {
    case Isa::scalar: return "scalar";
    case Isa::avx2: return "avx2";
    case Isa::avx512: return "avx512";
    case Isa::avx512_bf16: return "avx512_bf16";
  }
  return "unknown";
}

Isa parse_isa(std::string_view name) {
  for (Isa isa : kAllIsas) {
    if (name == name_of(isa)) return isa;
  }
  MIXP_CHECK(false, "unknown ISA '", name, "'; known: scalar, avx2, avx512, avx512_bf16");
  return Isa::scalar;  // unreachable
}

IsaLimit::IsaLimit(Isa max) : previous_(t_isa_cap) {
  if (max < t_isa_cap) t_isa_cap = max;
}

IsaLimit::~IsaLimit() { t_isa_cap = previous_; }

namespace detail {

ChoiceContext current_choice_context() {
  return {.isa_cap = t_isa_cap, .reference_depth = t_reference_depth};
}

ChoiceContextScope::ChoiceContextScope(const ChoiceContext& context)
    : previous_(current_choice_context()) {
  t_isa_cap = context.isa_cap;
  t_reference_depth = context.reference_depth;
}

ChoiceContextScope::~ChoiceContextScope() {
  t_isa_cap = previous_.isa_cap;
  t_reference_depth = previous_.reference_depth;
}

int& reference_depth() { return t_reference_depth; }

}  // namespace detail

}  // namespace mixp
