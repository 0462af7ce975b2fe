// The optimizers and learning-rate schedule of a run, from its options.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "mixp/amp/presets.h"
#include "mixp/optim/lr_schedule.h"
#include "mixp/optim/optimizer.h"
#include "mixp/train/trainer.h"

namespace mixp::train {

/// One optimizer over the parameters it updates, and their names (for messages).
struct OptimizerGroup {
  std::unique_ptr<optim::Optimizer> optimizer;
  std::vector<std::string> names;
};

/// Language models: a decayed group of the matrices and an undecayed one of the vectors.
/// Classifiers and regression: one group. `params` are the preset's copies, named, or (ZeRO)
/// views of pieces of them; `whole[i]` is the parameter params[i] is, or is a piece of, whose
/// dimensions choose its group.
std::vector<OptimizerGroup> make_optimizers(
    const std::vector<std::pair<std::string, Tensor>>& params, const TrainOptions& options,
    const amp::Preset& preset, bool language_model, const std::vector<Tensor>& whole);

/// The schedule of options.schedule over `total` steps.
std::unique_ptr<optim::LrSchedule> make_schedule(const TrainOptions& options, bool language_model,
                                                 int64_t total);

/// Throws mixp::Error naming the first optimizer or schedule setting that is out of range or
/// does not apply to the chosen kind.
void validate_optimizer_options(const TrainOptions& options);

}  // namespace mixp::train
