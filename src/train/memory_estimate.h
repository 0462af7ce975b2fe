// What a run will need at its peak, measured before its first step.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "mixp/amp/presets.h"
#include "mixp/train/trainer.h"

namespace mixp::train {

struct MemoryEstimate {
  int64_t resident = 0;  ///< what is allocated already: parameters, optimizer state, data
  int64_t step = 0;      ///< gradients, activations and workspace of a step at `batch`
  int64_t batch = 0;
  int64_t total() const { return resident + step; }
  /// "about 20.8 GiB (3.1 GiB already allocated: parameters, optimizer state and data;
  /// 17.7 GiB for a step of 100000 samples)".
  std::string describe() const;
};

/// The peak of a run at data.batch_size() samples a step in `micro_batches` parts (the passes of
/// one part at a time hold its activations): what is allocated now, plus a step
/// extrapolated from forward and backward passes of one and of two training samples (their
/// difference is what each sample adds). The model's buffers and generator and the data's
/// loader are restored afterwards, and the gradients dropped, so the run goes on as if the
/// passes had not happened. Nothing for data whose batch size or loader state is unknown.
std::optional<MemoryEstimate> estimate_memory(TrainModel& model, DataSource& data,
                                              const amp::Preset& preset,
                                              const std::vector<Tensor>& parameters,
                                              int64_t micro_batches = 1);

/// "20.8 GiB", or "512.0 MiB" below a GiB.
std::string bytes_text(int64_t bytes);

/// The memory the system can still give (MemAvailable of /proc/meminfo), in bytes; 0 when
/// unknown.
int64_t available_memory();

}  // namespace mixp::train
