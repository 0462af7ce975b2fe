// mixp/amp/grad_scaler.h — dynamic loss scaling, with PyTorch's GradScaler semantics.
//
// fp16 gradients underflow: a loss scaled by S before backward gives gradients scaled by S,
// which unscale() divides out again (in fp32) before the optimizer uses them. When a scaled
// gradient overflows (inf or NaN anywhere), that step is skipped and the scale falls; after
// growth_interval clean steps in a row it grows. With the default options every number is
// PyTorch's (torch.cuda.amp.GradScaler: init_scale 2^16, growth 2, backoff 0.5, interval 2000).
//
// Example (one optimizer; several are fine, each unscaled and stepped once per update):
//
//   mixp::amp::GradScaler scaler;
//   for (...) {
//     for (auto& micro : micro_batches)                    // gradient accumulation:
//       scaler.scale(loss_of(micro)).backward();           //   scale every micro-loss
//     scaler.unscale(opt);                                 // optional: to clip real gradients
//     mixp::optim::clip_grad_norm(params, 1.0);
//     scaler.step(opt);                                    // skipped if a gradient held inf/NaN
//     scaler.update();                                     // the scale for the next step
//     opt.zero_grad();
//   }
//
// Beyond PyTorch, all off by default: hysteresis (back off only after N overflow steps in a
// row, as DeepSpeed), bounds on the scale, a static (constant) scale, a log of every change
// of the scale with the parameter whose gradient overflowed first, and underflow-aware growth:
// grow as soon as too many gradients would underflow fp16, not only every growth_interval
// clean steps (GradScalerOptions::underflow_fraction).
//
// The scale-update rule itself is the pure function update_scale(), which the command
// `mixp scaler-trace` runs as well.
#pragma once

#include <cstdint>
#include <functional>
#include <limits>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "mixp/optim/optimizer.h"
#include "mixp/state_dict.h"
#include "mixp/tensor.h"

namespace mixp::amp {

/// What update() does when an overflow asks for a smaller scale that the bounds refuse: the
/// scale is already at min_scale, or it would become 0 (with min_scale 0, PyTorch's default,
/// the scale can walk through the fp32 subnormals to 0, after which every gradient is 0).
enum class AtMinScale : uint8_t {
  warn = 0,         ///< keep the scale where the rule puts it; warn once (set_warning_handler)
  throw_error = 1,  ///< throw mixp::Error naming the step, leaving the scaler unchanged
};

struct GradScalerOptions {
  // ---- PyTorch's options and defaults ----
  double init_scale = 65536.0;     ///< rounded to fp32; must be positive and finite there
  double growth_factor = 2.0;      ///< > 1
  double backoff_factor = 0.5;     ///< in (0, 1)
  int64_t growth_interval = 2000;  ///< clean steps in a row before the scale grows; >= 1
  bool enabled = true;             ///< false: scale() and unscale() do nothing, step() always steps

  // ---- beyond PyTorch; the defaults keep PyTorch's behaviour exactly ----
  /// false: a static scaler, whose scale stays init_scale (overflow steps are still skipped).
  bool dynamic = true;
  /// Back off only on the N-th overflow step in a row and on every one after it (DeepSpeed's
  /// consecutive hysteresis). Every overflow step is skipped either way. >= 1.
  int64_t hysteresis = 1;
  /// The scale never falls below min_scale nor grows above max_scale (both rounded to fp32).
  double min_scale = 0.0;
  double max_scale = std::numeric_limits<double>::infinity();
  AtMinScale at_min_scale = AtMinScale::warn;

  /// Underflow-aware growth; 0 (the default) turns it off. Every underflow_check_interval
  /// steps, unscale() also counts the scaled gradient elements that fp16 would flush to zero
  /// (|g| <= 2^-25, zeros included: in fp16 compute a flushed activation gradient reaches the
  /// weight gradients as exact zeros) and notes the largest |g|. When more than this fraction
  /// of them would flush and the step was clean, update() multiplies the scale by
  /// growth_factor (ScaleChange::underflow_growth; the growth tracker restarts), unless the
  /// grown scale would exceed max_scale, or reach the lowest scale that has overflowed so far,
  /// or put the largest gradient, unscaled and then scaled by the grown scale, above fp16's max
  /// (65504): never past the largest overflow-free scale it has evidence of. In [0, 1).
  double underflow_fraction = 0.0;
  int64_t underflow_check_interval = 1;  ///< steps between the counts; >= 1

  /// Throws mixp::Error naming the first bad option.
  void validate() const;
};

/// The state the scale-update rule changes.
struct ScaleState {
  float scale = 65536.0f;
  int64_t growth_tracker = 0;         ///< clean steps since the last change or overflow
  int64_t consecutive_overflows = 0;  ///< for hysteresis
};

/// What one application of the rule did. Append-only, explicit values.
enum class ScaleChange : uint8_t {
  none = 0,              ///< a clean step before the interval, or a static scaler
  growth = 1,            ///< multiplied by growth_factor
  growth_to_max = 2,     ///< grew, but only up to max_scale
  growth_refused = 3,    ///< the interval was reached, but fp32(scale * growth) is inf or the
                         ///< scale is at max_scale: unchanged (the tracker restarts)
  backoff = 4,           ///< multiplied by backoff_factor
  backoff_to_min = 5,    ///< fell, but only down to min_scale
  backoff_refused = 6,   ///< an overflow asked to back off, but the scale is at min_scale
  backoff_delayed = 7,   ///< an overflow within the hysteresis: unchanged
  set_by_user = 8,       ///< GradScaler::update(new_scale)
  underflow_growth = 9,  ///< multiplied by growth_factor: too many gradients would underflow
};
const char* name_of(ScaleChange change);

/// The scale-update rule of torch._amp_update_scale_, extended by the options above:
///   found_inf: tracker = 0; consecutive_overflows += 1; when it reaches options.hysteresis,
///              scale = max(fp32(scale * backoff_factor), min_scale)
///   else:      consecutive_overflows = 0; tracker += 1; when it reaches growth_interval,
///              new = min(fp32(scale * growth_factor), max_scale), taken only if finite and
///              larger, and tracker = 0.
/// The products are formed in double and rounded once to fp32. A static scaler changes nothing.
/// `options` must be valid (GradScalerOptions::validate).
ScaleChange update_scale(ScaleState& state, const GradScalerOptions& options, bool found_inf);

/// Where the first inf/NaN of a step was: the optimizer (in the order unscale() saw them this
/// step), the index of the parameter in its parameters(), that parameter's shape, and the
/// element of its gradient.
struct NonFiniteSource {
  size_t optimizer = 0;
  size_t parameter = 0;
  Shape shape;
  int64_t element = 0;
};

/// One change of the scale, as the log keeps it.
struct ScaleChangeRecord {
  int64_t step = 0;  ///< the number of update() calls before this one
  float old_scale = 0.0f;
  float new_scale = 0.0f;
  ScaleChange reason = ScaleChange::none;
  std::optional<NonFiniteSource> first_non_finite;  ///< set for back-offs
};

class GradScaler {
 public:
  explicit GradScaler(GradScalerOptions options = {});

  /// loss * scale, differentiable; fp32 (f64 for an f64 loss), like PyTorch's promotion of a
  /// bf16 or f16 loss by its fp32 scale. The loss itself when disabled.
  Tensor scale(const Tensor& loss) const;

  /// Divides every gradient of `optimizer`'s parameters by the scale, in place, multiplying by
  /// the fp32 inverse in fp32 (f64 for f64 gradients) and rounding once to the gradient's
  /// dtype, and records whether any of them held an inf or NaN (judged before unscaling). One
  /// pass over each gradient, split over threads in fixed chunks: the result does not depend
  /// on the thread count. Calling it twice for one optimizer before update(), or after step(),
  /// throws mixp::Error.
  void unscale(optim::Optimizer& optimizer);

  /// unscale(optimizer) unless already done, then optimizer.step() unless a gradient held an
  /// inf or NaN. Returns whether the step was applied. A second step() of the same optimizer
  /// before update() throws mixp::Error.
  bool step(optim::Optimizer& optimizer);

  /// The scale for the next step, from whether any optimizer unscaled since the last update
  /// found an inf or NaN. Throws mixp::Error if none was unscaled or stepped.
  void update();
  /// Sets the scale (positive, finite in fp32), as PyTorch's update(new_scale); the growth
  /// tracker is kept.
  void update(double new_scale);

  /// The scale the next scale() multiplies by (1 when disabled, as PyTorch).
  float get_scale() const;
  bool is_enabled() const { return options_.enabled; }
  const GradScalerOptions& options() const { return options_; }
  int64_t growth_tracker() const { return state_.growth_tracker; }
  /// update() calls so far.
  int64_t steps() const { return steps_; }
  /// Whether unscale() of `optimizer` since the last update() found an inf or NaN.
  bool found_inf(const optim::Optimizer& optimizer) const;
  /// Whether each optimizer unscaled since the last update() found an inf or NaN, in the order
  /// unscale() saw them.
  std::vector<bool> found_inf_flags() const;
  /// Replaces those flags before step(), as data parallelism does with their OR over the
  /// ranks, so that every rank skips the same steps and keeps the same scale. Throws
  /// mixp::Error when their number differs or an optimizer was already stepped.
  ///
  ///   for (auto& opt : optimizers) scaler.unscale(opt);
  ///   scaler.set_found_inf_flags(or_over_ranks(scaler.found_inf_flags()));
  void set_found_inf_flags(const std::vector<bool>& flags);

  /// Every change of the scale, oldest first.
  const std::vector<ScaleChangeRecord>& scale_log() const { return log_; }

  /// PyTorch's state_dict: "scale", "growth_factor", "backoff_factor", "growth_interval",
  /// "_growth_tracker", plus mixp's "_consecutive_overflows" and "_steps" (PyTorch ignores
  /// them), and "_overflow_ceiling" with underflow-aware growth on (when finite). Empty when
  /// disabled, as PyTorch.
  std::map<std::string, double> state() const;
  /// Restores a state() (PyTorch's five keys are required, mixp's are optional). Throws
  /// mixp::Error naming a missing or bad key, leaving the scaler unchanged.
  void load_state(const std::map<std::string, double>& state);
  /// state() as a StateDict of exact reals, for checkpoints, and back (load_state's checks).
  StateDict state_dict() const;
  void load_state_dict(const StateDict& state);

  /// Receives the one warning a scaler gives (the scale could not fall further); the default
  /// writes it to stderr.
  void set_warning_handler(std::function<void(const std::string&)> handler);

 private:
  enum class Stage : uint8_t { unscaled = 1, stepped = 2 };
  struct PerOptimizer {
    const optim::Optimizer* optimizer;
    Stage stage;
    bool found_inf;
    std::optional<NonFiniteSource> first_non_finite;
    int64_t flushable = 0;  // underflow-aware growth: elements fp16 would flush, of `counted`
    int64_t counted = 0;
    double max_abs = 0.0;  // the largest scaled |g| counted
  };
  bool underflow_check_due() const;
  PerOptimizer* find(const optim::Optimizer& optimizer);
  void record_change(float old_scale, ScaleChange reason,
                     const std::optional<NonFiniteSource>& source);

  GradScalerOptions options_;
  ScaleState state_;
  int64_t steps_ = 0;
  std::vector<PerOptimizer> per_optimizer_;
  std::vector<ScaleChangeRecord> log_;
  std::function<void(const std::string&)> warn_;
  bool warned_ = false;
  // Underflow-aware growth stays below the lowest scale that overflowed.
  float overflow_ceiling_ = std::numeric_limits<float>::infinity();
};

}  // namespace mixp::amp
