// Benchmarks run by `mixp bench`. Each prints a table whose speeds are ratios against a
// baseline measured in the same run, interleaved with it, so that a noisy machine shows in
// both and cancels out.
#pragma once

#include <cstdint>
#include <cstdio>
#include <string>

#include "mixp/dtype.h"

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

}  // namespace mixp::bench
