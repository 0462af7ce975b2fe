// Benchmarks run by `mixp bench`. Each prints a table whose speeds are ratios against a
// baseline measured in the same run, interleaved with it, so that a noisy machine shows in
// both and cancels out.
#pragma once

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <string>

#include "mixp/dtype.h"
#include "mixp/nn/models.h"

namespace mixp::bench {

struct ConvertBenchOptions {
  int mib = 64;   ///< size of the fp32 buffer
  int reps = 10;  ///< timed repetitions of each kernel; the median is reported
};

/// Bulk conversion fp32 <-> f16, bf16, e4m3, e5m2 on every ISA path this CPU has, beside
/// memcpy of the same fp32 buffer. GB/s counts the bytes read plus the bytes written.
int run_convert(const ConvertBenchOptions& options, std::FILE* out);

struct MatmulBenchOptions {
  DType dtype = DType::f32;
  int64_t m = 4096, k = 768, n = 3072;
  int reps = 10;
};

/// ops::matmul against a bare oneDNN matmul primitive of the same shape, in GFLOP/s.
int run_matmul(const MatmulBenchOptions& options, std::FILE* out);

struct StepBenchOptions {
  std::string model = "gpt";
  DType dtype = DType::f32;
  int layers = 6, heads = 6;
  int64_t width = 384, context = 256, batch = 16, vocab = 65;
  int steps = 3;
};

/// Forward and backward of one training step; ms per step and peak memory by tag.
int run_step(const StepBenchOptions& options, std::FILE* out);

struct PeakBenchOptions {
  int reps = 5;        ///< timed runs of each loop; the best is reported
  double scale = 1.0;  ///< multiplies the iterations (about 0.1 s a run at 1)
};

/// GFLOP/s of the machine: fp32 FMA (AVX-512 vfmadd231ps) and bf16 dot products (AVX-512 BF16
/// vdpbf16ps, 64 FLOP an instruction), on one core and on num_threads() threads.
struct PeakResult {
  double f32_one_core = 0, bf16_one_core = 0, f32_all_cores = 0, bf16_all_cores = 0;
  int threads = 1;
  /// The machine's peak: the larger of the all-cores figure and threads x one core. The cores
  /// do not share FMA units, and on a quiet machine the two agree; when other work shares the
  /// cores, the all-cores run falls short and would overstate a model's percent of peak.
  double f32_peak() const { return std::max(f32_all_cores, threads * f32_one_core); }
  double bf16_peak() const { return std::max(bf16_all_cores, threads * bf16_one_core); }
};
/// Throws mixp::Error when the CPU lacks AVX-512 F or AVX-512 BF16.
PeakResult measure_peak(const PeakBenchOptions& options);
int run_peak(const PeakBenchOptions& options, std::FILE* out);

struct TrainBenchOptions {
  std::string model = "gpt";  ///< mlp, cnn or gpt, at the built-in shapes
  std::string precision = "fp32";
  int steps = 10, warmup = 3;
  int64_t batch = 0;       ///< 0: as `mixp train` (64 images, 16 sequences)
  double peak_gflops = 0;  ///< > 0: the peak to compare with; 0: measure_peak() now
};

/// `mixp train`'s default batch size of a built-in model.
int64_t default_batch(const std::string& model);
/// FLOP of one training step of model `config` on `batch` samples (formula in the source).
double train_step_flop(const nn::ModelConfig& config, int64_t batch);
/// One JSON line: median_ms, samples_per_s, gflops, pct_of_peak, peak memory by tag, ...
int run_train_bench(const TrainBenchOptions& options, std::FILE* out);

struct SampleBenchOptions {
  int layers = 6, heads = 6;
  int64_t width = 384, context = 256, vocab = 65;
  std::string precision = "fp32";
  int64_t tokens = 255;  ///< generated per round by each path: with the prompt, one context
  int rounds = 3;        ///< each round times both paths; the medians are reported
};

/// Sampling tokens per second of a randomly initialized gpt with the key/value cache and
/// without it, and their ratio.
int run_sample_bench(const SampleBenchOptions& options, std::FILE* out);

}  // namespace mixp::bench
