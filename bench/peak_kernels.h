// The inner loops of `mixp bench peak`, one file per ISA, each compiled with its own -m flags
// (bench/CMakeLists.txt). Callers check the CPU first (cpu_features()): running one on a CPU
// without its instructions is an illegal instruction, not an error.
#pragma once

#include <cstdint>

namespace mixp::bench {

/// Independent dependency chains per loop: enough for 2 issues a cycle at 4 to 8 cycles latency.
inline constexpr int kPeakAccumulators = 16;

/// `iterations` rounds of 16 independent 512-bit vfmadd231ps chains: 16 * 16 * 2 FLOP a round.
/// Returns a value derived from every accumulator, so that the loop cannot be dropped.
float fma_f32_avx512(int64_t iterations);
inline constexpr int64_t kFmaFlopPerIteration = kPeakAccumulators * 16 * 2;

/// `iterations` rounds of 16 independent 512-bit vdpbf16ps chains: each instruction multiplies
/// 32 bf16 pairs and adds them into 16 fp32 lanes, 2 multiply-adds a lane: 64 FLOP.
float dpbf16_avx512_bf16(int64_t iterations);
inline constexpr int64_t kDpbf16FlopPerIteration = kPeakAccumulators * 64;

}  // namespace mixp::bench
