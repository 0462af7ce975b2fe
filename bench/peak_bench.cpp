// The machine's peak: fp32 FMA and bf16 dot-product throughput, on one core and on every core
// (one OpenMP thread per core, each running the same loop). Each figure is the best of a few
// timed runs, since a shared machine can only make a run slower.
#include <omp.h>

#include <algorithm>
#include <chrono>
#include <vector>

#include "bench/bench.h"
#include "bench/peak_kernels.h"
#include "mixp/cpu.h"
#include "mixp/error.h"
#include "mixp/runtime.h"

namespace mixp::bench {
namespace {

using Clock = std::chrono::steady_clock;

using PeakLoop = float (*)(int64_t);

// GFLOP/s of `threads` threads each running loop(iterations), the best of `reps` runs.
double measure(PeakLoop loop, int64_t flop_per_iteration, int64_t iterations, int threads,
               int reps) {
  double best = 0;
  volatile float sink = 0;
  for (int r = 0; r < reps; ++r) {
    const auto start = Clock::now();
    float total = 0;
#pragma omp parallel num_threads(threads) reduction(+ : total)
    total += loop(iterations);
    const double s = std::chrono::duration<double>(Clock::now() - start).count();
    sink = sink + total;
    best = std::max(best, double(flop_per_iteration) * double(iterations) * threads / s / 1e9);
  }
  return best;
}

// About 0.1 s a run at 2 instructions a cycle and 4-5 GHz.
constexpr int64_t kIterations = int64_t(1) << 24;

}  // namespace

PeakResult measure_peak(const PeakBenchOptions& o) {
  const CpuFeatures& f = cpu_features();
  MIXP_CHECK(f.avx512f, "bench peak: the fp32 loop needs AVX-512 F, which this CPU lacks");
  MIXP_CHECK(f.avx512_bf16,
             "bench peak: the bf16 loop needs AVX-512 BF16 (vdpbf16ps), which this CPU lacks");
  MIXP_CHECK(o.reps >= 1, "bench peak: --reps must be at least 1, got ", o.reps);
  const int64_t iterations = std::max<int64_t>(1, int64_t(double(kIterations) * o.scale));
  PeakResult r;
  r.threads = num_threads();
  r.f32_one_core = measure(fma_f32_avx512, kFmaFlopPerIteration, iterations, 1, o.reps);
  r.bf16_one_core = measure(dpbf16_avx512_bf16, kDpbf16FlopPerIteration, iterations, 1, o.reps);
  r.f32_all_cores = measure(fma_f32_avx512, kFmaFlopPerIteration, iterations, r.threads, o.reps);
  r.bf16_all_cores =
      measure(dpbf16_avx512_bf16, kDpbf16FlopPerIteration, iterations, r.threads, o.reps);
  return r;
}

int run_peak(const PeakBenchOptions& o, std::FILE* out) {
  const PeakResult r = measure_peak(o);
  std::fprintf(out,
               "mixp bench peak: best of %d runs, %d threads\n"
               "loop                          1 core GFLOP/s   %d cores GFLOP/s\n"
               "fp32 vfmadd231ps zmm (32 FLOP)     %10.1f        %10.1f\n"
               "bf16 vdpbf16ps zmm (64 FLOP)       %10.1f        %10.1f\n"
               "peak = max(all cores, %d x one core), since other work may share the cores\n"
               "{\"f32_gflops\": %.1f, \"bf16_gflops\": %.1f, \"f32_gflops_one_core\": %.1f, "
               "\"bf16_gflops_one_core\": %.1f, \"f32_gflops_all_cores\": %.1f, "
               "\"bf16_gflops_all_cores\": %.1f, \"threads\": %d}\n",
               o.reps, r.threads, r.threads, r.f32_one_core, r.f32_all_cores, r.bf16_one_core,
               r.bf16_all_cores, r.threads, r.f32_peak(), r.bf16_peak(), r.f32_one_core,
               r.bf16_one_core, r.f32_all_cores, r.bf16_all_cores, r.threads);
  return 0;
}

}  // namespace mixp::bench
