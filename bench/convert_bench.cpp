#include <algorithm>
#include <chrono>
#include <cstring>
#include <functional>
#include <string>
#include <vector>

#include "bench/bench.h"
#include "bench/median.h"
#include "mixp/convert.h"
#include "mixp/cpu.h"
#include "mixp/error.h"
#include "mixp/random.h"

namespace mixp::bench {
namespace {

using Clock = std::chrono::steady_clock;

double seconds(const std::function<void()>& work) {
  const auto start = Clock::now();
  work();
  return std::chrono::duration<double>(Clock::now() - start).count();
}

struct Kernel {
  std::string op;
  size_t bytes_per_element;  // read + written
  std::function<void()> run;
};

}  // namespace

int run_convert(const ConvertBenchOptions& options, std::FILE* out) {
  MIXP_CHECK(options.mib >= 1 && options.mib <= 4096, "bench convert: --mib must be 1..4096, got ",
             options.mib);
  MIXP_CHECK(options.reps >= 1 && options.reps <= 1000,
             "bench convert: --reps must be 1..1000, got ", options.reps);
  const size_t n = size_t(options.mib) * 1024 * 1024 / sizeof(float);

  // Values of a typical activation tensor: normal, a few orders of magnitude.
  std::vector<float> f32(n), f32_out(n), copy(n);
  Philox rng(PhiloxState{2026, 0, 0});
  for (float& x : f32) x = rng.normal() * 3.0f;
  std::vector<float16> f16(n);
  std::vector<bfloat16> bf16(n);
  std::vector<float8_e4m3> e4m3(n);
  std::vector<float8_e5m2> e5m2(n);
  convert(f32, f16);
  convert(f32, bf16);
  convert(f32, e4m3, 1.0f, Overflow::saturate);
  convert(f32, e5m2, 1.0f, Overflow::saturate);

  const std::vector<Kernel> kernels = {
      {"f32->bf16", 6, [&] { convert(f32, bf16); }},
      {"f32->f16", 6, [&] { convert(f32, f16); }},
      {"bf16->f32", 6, [&] { convert(bf16, f32_out); }},
      {"f16->f32", 6, [&] { convert(f16, f32_out); }},
      {"f32->e4m3", 5, [&] { convert(f32, e4m3, 1.0f, Overflow::saturate); }},
      {"f32->e5m2", 5, [&] { convert(f32, e5m2, 1.0f, Overflow::saturate); }},
      {"e4m3->f32", 5, [&] { convert(e4m3, f32_out, 1.0f); }},
      {"e5m2->f32", 5, [&] { convert(e5m2, f32_out, 1.0f); }},
  };
  auto copy_once = [&] { std::memcpy(copy.data(), f32.data(), n * sizeof(float)); };
  copy_once();  // first touch of every page

  std::fprintf(out,
               "mixp bench convert: %d MiB of fp32 (%zu values), median of %d runs, one thread\n"
               "GB/s = (bytes read + bytes written) / time; memcpy copies the same fp32 buffer, "
               "timed between the runs of each row.\n"
               "isa caps the kernel choice: where an op has no kernel for that ISA, the next lower "
               "one runs.\n\n",
               options.mib, n, options.reps);
  std::fprintf(out, "%-10s %-12s %9s %9s %12s %10s\n", "op", "isa", "ms", "GB/s", "memcpy GB/s",
               "vs memcpy");
  for (const Kernel& k : kernels) {
    for (Isa isa : kAllIsas) {
      if (isa > best_isa()) break;
      IsaLimit limit(isa);
      std::vector<double> t_kernel, t_copy;
      k.run();  // warm up
      for (int r = 0; r < options.reps; ++r) {
        t_copy.push_back(seconds(copy_once));
        t_kernel.push_back(seconds(k.run));
      }
      const double tk = median_of(t_kernel), tc = median_of(t_copy);
      const double gbs = double(n * k.bytes_per_element) / tk * 1e-9;
      const double copy_gbs = double(n * 2 * sizeof(float)) / tc * 1e-9;
      std::fprintf(out, "%-10s %-12s %9.2f %9.2f %12.2f %9.0f%%\n", k.op.c_str(), name_of(isa),
                   tk * 1e3, gbs, copy_gbs, 100.0 * gbs / copy_gbs);
    }
  }
  return 0;
}

}  // namespace mixp::bench
