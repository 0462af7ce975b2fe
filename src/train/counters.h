// The trainer's own state: step and epoch counters, timing windows, skipped steps, history.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "mixp/state_dict.h"
#include "mixp/train/trainer.h"

namespace mixp::train {

struct TrainerCounters {
  int64_t step = 0, epoch = 0, empty_in_a_row = 0;
  // The metrics line being gathered: since the last logged step.
  double window_loss = 0.0, window_ms = 0.0;
  int64_t window_steps = 0, window_samples = 0;
  int64_t window_loss_steps = 0;  // steps of the window whose loss was finite
  // The window's total gradient norms (before clipping) over its steps whose norm was finite,
  // and its steps without an update, with a non-finite loss or gradient, with a non-finite loss.
  double window_grad_norm = 0.0, window_grad_norm_max = 0.0;
  int64_t window_grad_norm_steps = 0;
  int64_t window_skipped = 0, window_nonfinite = 0, window_nonfinite_losses = 0;
  double train_ms = 0.0;
  int64_t train_samples = 0;
  int64_t skipped = 0, nonfinite = 0;  // TrainResult::skipped_steps and nonfinite_steps
  int64_t skipped_in_a_row = 0;
  std::string first_overflow;   // the first overflowing gradient of the run
  std::string streak_overflow;  // the first overflowing gradient of the current skipped streak
  std::vector<double> step_ms;
  std::vector<StepMetrics> log;
  std::vector<EvalMetrics> evals;

  /// Every field, the history as JSON text under "history" and "step_ms".
  StateDict state_dict() const;
  /// Checks every key before it changes anything.
  void load_state_dict(const StateDict& state);
};

}  // namespace mixp::train
