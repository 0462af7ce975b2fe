// Benchmarks run by `mixp bench`. Each prints a table whose speeds are ratios against a
// baseline measured in the same run, interleaved with it, so that a noisy machine shows in
// both and cancels out.
#pragma once

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <map>
#include <string>
#include <vector>

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

struct AllReduceBenchOptions {
  int64_t elements = int64_t{25} << 18;  ///< 25 MiB of f32
  DType dtype = DType::f32;              ///< f32 or bf16
  int reps = 20;                         ///< timed all-reduces; the median is reported
  int warmup = 3;                        ///< untimed all-reduces first
};

/// Under `mpirun -np N`: a loop of blocking Communicator::all_reduce (sum) of one buffer of
/// `elements` values between the N ranks; rank 0 prints one JSON line with the median and
/// the fastest time (each repetition's time is the slowest rank's). As one process it times
/// the single-process backend. Example:
///
///   mpirun -np 2 mixp bench allreduce --elements 3194624 --dtype bf16
///   {"bench": "allreduce", "ranks": 2, "dtype": "bf16", "elements": 3194624, ...}
int run_allreduce_bench(const AllReduceBenchOptions& options, std::FILE* out);

/// `mixp bench dp`: the figures of data-parallel training, in one invocation that launches
/// `mpirun` for every run. Example:
///
///   mixp bench dp --rounds 3 --bucket-mb 25,4,1
///
/// Each round trains the same gpt on the same text with the same per-rank batch (weak
/// scaling), one thread per rank: once as one rank (the baseline, no reduction), as two
/// one-rank runs at once that do not communicate (the cost of sharing the machine, kept
/// apart from that of communication), as two ranks for each --bucket-mb value with f32 reduction,
/// once as two ranks with bf16 reduction (the first bucket size), and times the standalone
/// all-reduce of the gradient payload between two ranks in f32 and in bf16 (run_allreduce_bench).
/// Every figure is a ratio against the round's baseline, and the medians over rounds are printed as
/// a table, then one JSON line. The run folders stay under `out`: round-R/n1, round-R/pair-0 and
/// round-R/pair-1, round-R/n2-f32-bucket-B, round-R/n2-bf16-bucket-B, and
/// round-R/allreduce-f32.log, round-R/allreduce-bf16.log.
struct DpBenchOptions {
  std::string mixp;               ///< the mixp that trains; empty: this executable
  std::string mpirun = "mpirun";  ///< found on PATH unless a path
  std::string data;               ///< the text; empty: data/kjv.txt (scripts/make-kjv.sh)
  double val_fraction = 0.001;    ///< the validation split, evaluated once at the end, untimed
  std::string out = "runs/bench-dp";
  int layers = 4, heads = 4;
  int64_t width = 256, context = 64;
  int64_t batch_per_rank = 8;  ///< sequences per rank and step: N ranks train N times as many
  int64_t steps = 80;
  std::vector<double> bucket_mb = {25, 4, 1};  ///< --bucket-mb of the f32 runs
  int rounds = 3;
  int allreduce_reps = 20;
};

/// What `mixp bench dp` reads from a run folder's summary.json.
struct DpRunSummary {
  int world_size = 1;
  std::string reduce_dtype;  ///< empty for one process
  int64_t bytes_sent_per_step = 0;
  double median_step_ms = 0;
  double samples_per_s = 0;                          ///< global samples over training time
  std::map<std::string, int64_t> peak_memory_bytes;  ///< rank 0's, by tag
  nn::ModelConfig model;
};

/// Reads `path` (a summary.json). Throws mixp::Error naming the file and the first field that
/// is missing or of the wrong type.
DpRunSummary read_dp_summary(const std::string& path);

/// Bytes of the f32 gradients of every parameter of `model`: the payload that each rank
/// contributes to the all-reduce of a step with f32 reduction (bf16 reduction sends half).
int64_t gradient_payload_bytes(const nn::ModelConfig& model);

/// Weak-scaling efficiency: per-rank samples/s of `several` (its samples_per_s over its
/// world_size) over the samples/s of `one`.
double weak_scaling_efficiency(const DpRunSummary& one, const DpRunSummary& several);

/// The step time that data parallelism adds: several's median step ms minus one's.
double exposed_communication_ms(const DpRunSummary& one, const DpRunSummary& several);

/// The arguments of one training run of the bench: `mpirun -np ranks ... mixp train ...` with
/// `ranks` x batch_per_rank sequences a step, one thread, into `folder`; reduce_dtype,
/// bucket_mb and (when 1) zero are passed when ranks > 1. `as_root` adds mpirun's
/// --allow-run-as-root, `cores` below `ranks` its --oversubscribe.
std::vector<std::string> dp_train_arguments(const DpBenchOptions& options, const std::string& mixp,
                                            int ranks, const std::string& reduce_dtype,
                                            double bucket_mb, const std::string& folder,
                                            bool as_root, unsigned cores, int zero = 0);

/// Two one-rank trainings at once under `mpirun -np 2`, as dp_train_arguments(options, mixp,
/// 1, ...) trains, each rank without the variables that would make it join the other (so
/// they do not communicate), into folder-0 and folder-1: the cost of sharing the machine.
std::vector<std::string> dp_pair_arguments(const DpBenchOptions& options, const std::string& mixp,
                                           const std::string& folder, bool as_root, unsigned cores);

int run_dp_bench(const DpBenchOptions& options, std::FILE* out);

}  // namespace mixp::bench
