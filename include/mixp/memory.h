// mixp/memory.h — where every byte of tensor memory goes.
//
// Each tensor allocation carries a MemoryTag saying what it is for. The library counts current
// and peak bytes per tag and per dtype, so that a run can report, for instance, that its bf16
// activations took half the bytes of the fp32 ones.
//
// Example:
//
//   mixp::memory::reset_peaks();
//   mixp::Tensor a = mixp::zeros({1024, 1024}, mixp::DType::bf16);   // tagged activation
//   const mixp::memory::Stats s = mixp::memory::stats();
//   // s.current(mixp::MemoryTag::activation) == 2 * 1024 * 1024
//   // s.current(mixp::DType::bf16) == 2 * 1024 * 1024
//   // s.at_peak(mixp::MemoryTag::activation) >= 2 * 1024 * 1024
//   std::puts(mixp::memory::report(s).c_str());
#pragma once

#include <array>
#include <cstdint>
#include <string>

#include "mixp/dtype.h"

namespace mixp {

/// What an allocation is for. Append-only: the values appear in reports and files.
enum class MemoryTag : uint8_t {
  parameter = 0,        ///< model weights as the model computes with them
  master = 1,           ///< fp32 master copies of low-precision weights
  gradient = 2,         ///< gradients of parameters
  activation = 3,       ///< forward results and everything saved for backward
  optimizer_state = 4,  ///< moments, momentum buffers
  workspace = 5,        ///< scratch space of kernels
  data = 6,             ///< input batches and labels
};
inline constexpr int kMemoryTagCount = 7;
const char* name_of(MemoryTag tag);

namespace memory {

struct Stats {
  std::array<int64_t, kMemoryTagCount> current_by_tag{};
  std::array<int64_t, kMemoryTagCount> peak_by_tag{};
  std::array<int64_t, kDTypeCount> current_by_dtype{};
  std::array<int64_t, kDTypeCount> peak_by_dtype{};
  /// Each tag's bytes at the instant the total reached peak_total; they sum to peak_total.
  std::array<int64_t, kMemoryTagCount> at_peak_by_tag{};
  int64_t current_total = 0;
  int64_t peak_total = 0;

  int64_t current(MemoryTag t) const { return current_by_tag[size_t(t)]; }
  int64_t peak(MemoryTag t) const { return peak_by_tag[size_t(t)]; }
  int64_t current(DType d) const { return current_by_dtype[size_t(d)]; }
  int64_t peak(DType d) const { return peak_by_dtype[size_t(d)]; }
  int64_t at_peak(MemoryTag t) const { return at_peak_by_tag[size_t(t)]; }
};

/// A snapshot of the counters (all threads).
Stats stats();
/// Sets every peak to the current value, to measure the peak of what follows.
void reset_peaks();
/// A table of current and peak bytes by tag and by dtype, and each tag's bytes at the total's
/// peak, in MiB.
std::string report(const Stats& stats);

/// Bytes of freed tensor memory that mixp keeps for reuse (not counted in Stats), and a way to
/// give them back to the system. Training loops allocate the same sizes every step; reusing
/// blocks spares the page faults of fresh memory.
size_t cached_bytes();
void release_cached();

/// Called by tensor storage on allocation and release.
void record_allocation(MemoryTag tag, DType dtype, int64_t bytes);
void record_release(MemoryTag tag, DType dtype, int64_t bytes);

}  // namespace memory
}  // namespace mixp
