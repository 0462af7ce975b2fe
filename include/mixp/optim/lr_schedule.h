// mixp/optim/lr_schedule.h — learning rate as a function of the step.
//
// A schedule maps the index of the update about to be applied (0 for the first) to a learning
// rate. It holds no state that changes: resuming a run only needs the step, which
// Optimizer::steps() counts. Its state_dict() is its settings, which a checkpoint keeps so that
// load_state_dict() can refuse to continue a run under another schedule.
//
//   ConstantLr{lr}                 lr at every step
//   WarmupCosineLr{...}            linear warmup from peak / warmup_steps at step 0 to peak at
//                                  step warmup_steps - 1, then cosine decay from peak at step
//                                  warmup_steps to min_lr at step total_steps, then min_lr:
//                                    progress = (step - warmup) / (total - warmup)
//                                    lr = min + (peak - min) * (1 + cos(pi * progress)) / 2
//
// Example:
//
//   mixp::optim::WarmupCosineLr schedule({.peak_lr = 6e-4, .min_lr = 6e-5,
//                                         .warmup_steps = 100, .total_steps = 5000});
//   for (...) {
//     opt.set_learning_rate(schedule.lr(opt.steps()));
//     ...; opt.step();
//   }
#pragma once

#include <cstdint>

#include "mixp/state_dict.h"

namespace mixp::optim {

class LrSchedule {
 public:
  virtual ~LrSchedule() = default;
  /// The learning rate for update number `step` (from 0); step must be >= 0.
  virtual double lr(int64_t step) const = 0;
  /// "kind" ("constant" or "warmup-cosine") and the settings.
  virtual StateDict state_dict() const = 0;
  /// Throws mixp::Error naming the first setting of `state` that differs from this schedule's.
  void load_state_dict(const StateDict& state) const;
};

class ConstantLr : public LrSchedule {
 public:
  /// lr must be finite and >= 0.
  explicit ConstantLr(double lr);
  double lr(int64_t step) const override;
  StateDict state_dict() const override;

 private:
  double lr_;
};

struct WarmupCosineOptions {
  double peak_lr = 1e-3;
  double min_lr = 0.0;       ///< in [0, peak_lr]
  int64_t warmup_steps = 0;  ///< >= 0
  int64_t total_steps = 1;   ///< >= warmup_steps
};

class WarmupCosineLr : public LrSchedule {
 public:
  /// Throws mixp::Error naming the offending value.
  explicit WarmupCosineLr(const WarmupCosineOptions& options);
  double lr(int64_t step) const override;
  StateDict state_dict() const override;
  const WarmupCosineOptions& options() const { return options_; }

 private:
  WarmupCosineOptions options_;
};

}  // namespace mixp::optim
