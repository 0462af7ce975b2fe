#include "mixp/optim/lr_schedule.h"

#include <cmath>
#include <numbers>

#include "mixp/error.h"

namespace mixp::optim {

ConstantLr::ConstantLr(double lr) : lr_(lr) {
  MIXP_CHECK(std::isfinite(lr) && lr >= 0.0, "ConstantLr: lr must be finite and >= 0, got ", lr);
}

double ConstantLr::lr(int64_t step) const {
  MIXP_CHECK(step >= 0, "ConstantLr: step must be >= 0, got ", step);
  return lr_;
}

WarmupCosineLr::WarmupCosineLr(const WarmupCosineOptions& o) : options_(o) {
  MIXP_CHECK(std::isfinite(o.peak_lr) && o.peak_lr >= 0.0,
             "WarmupCosineLr: peak_lr must be finite and >= 0, got ", o.peak_lr);
  MIXP_CHECK(o.min_lr >= 0.0 && o.min_lr <= o.peak_lr,
             "WarmupCosineLr: min_lr must be in [0, peak_lr = ", o.peak_lr, "], got ", o.min_lr);
  MIXP_CHECK(o.warmup_steps >= 0, "WarmupCosineLr: warmup_steps must be >= 0, got ",
             o.warmup_steps);
  MIXP_CHECK(o.total_steps >= o.warmup_steps, "WarmupCosineLr: total_steps (", o.total_steps,
             ") must be >= warmup_steps (", o.warmup_steps, ")");
}

double WarmupCosineLr::lr(int64_t step) const {
  const WarmupCosineOptions& o = options_;
  MIXP_CHECK(step >= 0, "WarmupCosineLr: step must be >= 0, got ", step);
  if (step < o.warmup_steps) return o.peak_lr * double(step + 1) / double(o.warmup_steps);
  if (step >= o.total_steps) return o.min_lr;
  const double progress = double(step - o.warmup_steps) / double(o.total_steps - o.warmup_steps);
  return o.min_lr + (o.peak_lr - o.min_lr) * 0.5 * (1.0 + std::cos(std::numbers::pi * progress));
}

void LrSchedule::load_state_dict(const StateDict& state) const {
  for (const auto& [key, mine] : state_dict().values) {
    const std::string& saved = state.get_text(key);
    MIXP_CHECK(saved == mine, "the saved learning-rate schedule has ", key, " ", saved,
               ", this run's has ", mine);
  }
}

StateDict ConstantLr::state_dict() const {
  StateDict s;
  s.set_text("kind", "constant");
  s.set_real("lr", lr_);
  return s;
}

StateDict WarmupCosineLr::state_dict() const {
  StateDict s;
  s.set_text("kind", "warmup-cosine");
  s.set_real("peak_lr", options_.peak_lr);
  s.set_real("min_lr", options_.min_lr);
  s.set_int("warmup_steps", options_.warmup_steps);
  s.set_int("total_steps", options_.total_steps);
  return s;
}

}  // namespace mixp::optim
