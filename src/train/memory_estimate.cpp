// A run's peak memory, measured on one and two samples before the run allocates its steps.
#include "train/memory_estimate.h"

#include <algorithm>
#include <cstdio>
#include <fstream>
#include <sstream>

#include "mixp/autograd.h"
#include "mixp/memory.h"

namespace mixp::train {
namespace {

// The peak bytes above what is allocated now of a forward and backward pass on the first `n`
// samples of `batch`; the gradients it leaves are dropped.
int64_t step_peak(TrainModel& model, const data::Batch& batch, const amp::Preset& preset,
                  const std::vector<Tensor>& parameters, int64_t n) {
  const int64_t before = memory::stats().current_total;
  memory::reset_peaks();
  {
    Tensor loss;
    {
      auto scope = preset.autocast();
      loss = task_loss(model.forward(batch.x.slice(0, n)), batch.y.slice(0, n), model.task());
    }
    loss.backward();
  }
  const int64_t peak = memory::stats().peak_total - before;
  for (Tensor p : parameters) p.set_grad(Tensor());
  return peak;
}

}  // namespace

std::string bytes_text(int64_t bytes) {
  char buf[32];
  const bool large = bytes >= int64_t(1) << 30;
  std::snprintf(buf, sizeof buf, "%.1f %s", double(bytes) / double(int64_t(1) << (large ? 30 : 20)),
                large ? "GiB" : "MiB");
  return buf;
}

std::string MemoryEstimate::describe() const {
  return "about " + bytes_text(total()) + " (" + bytes_text(resident) +
         " already allocated: parameters, optimizer state and data; " + bytes_text(step) +
         " for a step of " + std::to_string(batch) + " samples)";
}

std::optional<MemoryEstimate> estimate_memory(TrainModel& model, DataSource& data,
                                              const amp::Preset& preset,
                                              const std::vector<Tensor>& parameters,
                                              int64_t micro_batches) {
  // A step's activations are those of one micro-batch.
  const int64_t batch_size = (data.batch_size() + micro_batches - 1) / micro_batches;
  const std::optional<data::LoaderState> loader = data.loader_state();
  if (batch_size <= 0 || !loader) return std::nullopt;
  const std::optional<data::Batch> batch = data.next_train();
  data.set_loader_state(*loader);
  if (!batch || batch->x.size(0) < 2) return std::nullopt;
  // What the passes change: the buffers (batch norm's statistics) and the dropout generator.
  std::vector<std::pair<Tensor, Tensor>> buffers;  // (buffer, saved copy)
  for (const auto& [name, b] : model.named_buffers()) buffers.emplace_back(*b, b->clone());
  const std::optional<PhiloxState> generator = model.generator_state();
  MemoryEstimate e;
  e.resident = memory::stats().current_total;
  e.batch = batch_size;
  const int64_t one = step_peak(model, *batch, preset, parameters, 1);
  const int64_t two = step_peak(model, *batch, preset, parameters, 2);
  e.step = one + std::max<int64_t>(0, two - one) * (batch_size - 1);
  {
    NoGradGuard no_grad;
    for (auto& [buffer, saved] : buffers) buffer.copy_(saved);
  }
  if (generator) model.set_generator_state(*generator);
  memory::reset_peaks();
  return e;
}

int64_t available_memory() {
  std::ifstream meminfo("/proc/meminfo");
  for (std::string line; std::getline(meminfo, line);) {
    if (!line.starts_with("MemAvailable:")) continue;
    std::istringstream fields(line.substr(13));
    int64_t kib = 0;
    fields >> kib;
    return kib * 1024;
  }
  return 0;
}

}  // namespace mixp::train
