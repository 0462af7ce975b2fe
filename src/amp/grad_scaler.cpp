#include "mixp/amp/grad_scaler.h"

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstdio>
#include <span>
#include <type_traits>

#include "kernels/amp_unscale.h"
#include "mixp/autograd.h"
#include "mixp/error.h"
#include "mixp/ops.h"
#include "tensor/tensor_impl.h"

namespace mixp::amp {

// ---- options and the rule ----------------------------------------------------------------

void GradScalerOptions::validate() const {
  const float init = float(init_scale);
  MIXP_CHECK(std::isfinite(init) && init > 0.0f,
             "GradScaler: init_scale must be positive and finite in fp32, got ", init_scale);
  MIXP_CHECK(std::isfinite(growth_factor) && growth_factor > 1.0,
             "GradScaler: growth_factor must be finite and > 1, got ", growth_factor);
  MIXP_CHECK(backoff_factor > 0.0 && backoff_factor < 1.0,
             "GradScaler: backoff_factor must be in (0, 1), got ", backoff_factor);
  MIXP_CHECK(growth_interval >= 1, "GradScaler: growth_interval must be at least 1, got ",
             growth_interval);
  MIXP_CHECK(hysteresis >= 1, "GradScaler: hysteresis must be at least 1, got ", hysteresis);
  MIXP_CHECK(std::isfinite(float(min_scale)) && min_scale >= 0.0,
             "GradScaler: min_scale must be finite in fp32 and >= 0, got ", min_scale);
  MIXP_CHECK(!std::isnan(max_scale) && float(max_scale) >= float(min_scale),
             "GradScaler: max_scale (", max_scale, ") must be >= min_scale (", min_scale, ")");
  MIXP_CHECK(init >= float(min_scale) && init <= float(max_scale), "GradScaler: init_scale ",
             init_scale, " is outside [min_scale, max_scale] = [", min_scale, ", ", max_scale, "]");
  MIXP_CHECK(underflow_fraction >= 0.0 && underflow_fraction < 1.0,
             "GradScaler: underflow_fraction must be in [0, 1), got ", underflow_fraction);
  MIXP_CHECK(underflow_check_interval >= 1,
             "GradScaler: underflow_check_interval must be at least 1, got ",
             underflow_check_interval);
}

const char* name_of(ScaleChange change) {
  switch (change) {
    case ScaleChange::none: return "none";
    case ScaleChange::growth: return "growth";
    case ScaleChange::growth_to_max: return "growth_to_max";
    case ScaleChange::growth_refused: return "growth_refused";
    case ScaleChange::backoff: return "backoff";
    case ScaleChange::backoff_to_min: return "backoff_to_min";
    case ScaleChange::backoff_refused: return "backoff_refused";
    case ScaleChange::backoff_delayed: return "backoff_delayed";
    case ScaleChange::set_by_user: return "set_by_user";
    case ScaleChange::underflow_growth: return "underflow_growth";
  }
  return "unknown";
}

ScaleChange update_scale(ScaleState& state, const GradScalerOptions& options, bool found_inf) {
  if (!options.dynamic) return ScaleChange::none;
  const float min_scale = float(options.min_scale);
  const float max_scale = float(options.max_scale);
  if (found_inf) {
    state.growth_tracker = 0;
    if (state.consecutive_overflows < options.hysteresis) ++state.consecutive_overflows;
    if (state.consecutive_overflows < options.hysteresis) return ScaleChange::backoff_delayed;
    const float lower = float(double(state.scale) * options.backoff_factor);
    if (lower >= min_scale) {
      state.scale = lower;
      return ScaleChange::backoff;
    }
    if (state.scale > min_scale) {
      state.scale = min_scale;
      return ScaleChange::backoff_to_min;
    }
    return ScaleChange::backoff_refused;
  }
  state.consecutive_overflows = 0;
  const int64_t clean = state.growth_tracker + 1;
  if (clean != options.growth_interval) {
    state.growth_tracker = clean;
    return ScaleChange::none;
  }
  state.growth_tracker = 0;
  const float higher = float(double(state.scale) * options.growth_factor);
  if (std::isfinite(higher) && higher <= max_scale) {
    state.scale = higher;
    return ScaleChange::growth;
  }
  if (std::isfinite(max_scale) && state.scale < max_scale) {
    state.scale = max_scale;
    return ScaleChange::growth_to_max;
  }
  return ScaleChange::growth_refused;
}

namespace {

constexpr double kFp16Max = 65504.0;

std::string describe(const NonFiniteSource& s) {
  return detail::concat("parameter ", s.parameter, " of optimizer ", s.optimizer, " (shape ",
                        s.shape.to_string(), "), element ", s.element);
}

}  // namespace

// ---- GradScaler ----------------------------------------------------------------------------

GradScaler::GradScaler(GradScalerOptions options) : options_(options) {
  options_.validate();
  state_.scale = float(options_.init_scale);
  warn_ = [](const std::string& message) { std::fprintf(stderr, "mixp: %s\n", message.c_str()); };
}

Tensor GradScaler::scale(const Tensor& loss) const {
  if (!options_.enabled) return loss;
  MIXP_CHECK(loss.defined(), "GradScaler::scale: the loss is undefined");
  MIXP_CHECK(is_floating(loss.dtype()), "GradScaler::scale: the loss has dtype ",
             name_of(loss.dtype()), ", not a floating one");
  const bool keep = loss.dtype() == DType::f32 || loss.dtype() == DType::f64;
  return ops::mul_scalar(keep ? loss : loss.to(DType::f32), double(state_.scale));
}

GradScaler::PerOptimizer* GradScaler::find(const optim::Optimizer& optimizer) {
  for (PerOptimizer& p : per_optimizer_) {
    if (p.optimizer == &optimizer) return &p;
  }
  return nullptr;
}

void GradScaler::unscale(optim::Optimizer& optimizer) {
  if (!options_.enabled) return;
  if (const PerOptimizer* seen = find(optimizer)) {
    MIXP_CHECK(seen->stage != Stage::unscaled,
               "GradScaler::unscale: already called for this "
               "optimizer since the last update() (step ",
               steps_, ")");
    MIXP_CHECK(false, "GradScaler::unscale: called after step() for this optimizer (step ", steps_,
               ")");
  }
  // PyTorch: the inverse in double, rounded to fp32; a scale of 0 gives inf.
  const float inv = float(1.0 / double(state_.scale));
  const bool multiply = inv != 1.0f;
  PerOptimizer record{.optimizer = &optimizer,
                      .stage = Stage::unscaled,
                      .found_inf = false,
                      .first_non_finite = std::nullopt};
  const std::vector<Tensor>& params = optimizer.parameters();
  for (size_t i = 0; i < params.size(); ++i) {
    Tensor grad = params[i].grad();
    if (!grad.defined() || grad.numel() == 0) continue;
    if (underflow_check_due()) {
      const kernels::FlushCount count = kernels::count_fp16_flushable(grad);
      record.flushable += count.flushable;
      record.max_abs = std::max(record.max_abs, count.max_abs);
      record.counted += grad.numel();
    }
    const int64_t bad = kernels::unscale_and_check(grad, inv, multiply);
    if (multiply) ++grad.impl()->storage->version;
    if (bad >= 0 && !record.found_inf) {
      record.found_inf = true;
      record.first_non_finite = NonFiniteSource{.optimizer = per_optimizer_.size(),
                                                .parameter = i,
                                                .shape = grad.shape(),
                                                .element = bad};
    }
  }
  per_optimizer_.push_back(std::move(record));
}

bool GradScaler::step(optim::Optimizer& optimizer) {
  if (!options_.enabled) {
    optimizer.step();
    return true;
  }
  if (const PerOptimizer* seen = find(optimizer)) {
    MIXP_CHECK(seen->stage != Stage::stepped,
               "GradScaler::step: already called for this "
               "optimizer since the last update() (step ",
               steps_, ")");
  } else {
    unscale(optimizer);
  }
  PerOptimizer* p = find(optimizer);
  MIXP_ASSERT(p != nullptr);
  p->stage = Stage::stepped;
  if (p->found_inf) return false;
  optimizer.step();
  return true;
}

void GradScaler::record_change(float old_scale, ScaleChange reason,
                               const std::optional<NonFiniteSource>& source) {
  if (std::bit_cast<uint32_t>(old_scale) == std::bit_cast<uint32_t>(state_.scale)) return;
  log_.push_back(ScaleChangeRecord{.step = steps_,
                                   .old_scale = old_scale,
                                   .new_scale = state_.scale,
                                   .reason = reason,
                                   .first_non_finite = source});
}

void GradScaler::update() {
  if (!options_.enabled) return;
  MIXP_CHECK(!per_optimizer_.empty(),
             "GradScaler::update: no optimizer was unscaled or stepped "
             "since the last update() (step ",
             steps_, ")");
  std::optional<NonFiniteSource> first;
  bool found = false;
  for (const PerOptimizer& p : per_optimizer_) {
    if (p.found_inf && !found) first = p.first_non_finite;
    found = found || p.found_inf;
  }
  ScaleState next = state_;
  const ScaleChange change = update_scale(next, options_, found);
  const bool at_floor = change == ScaleChange::backoff_refused ||
                        (change == ScaleChange::backoff && next.scale == 0.0f);
  if (at_floor) {
    const std::string message = detail::concat(
        "GradScaler: step ", steps_, ": the gradients overflowed (first inf/NaN in ",
        first ? describe(*first) : std::string("an unknown parameter"), ") and the loss scale ",
        change == ScaleChange::backoff_refused
            ? detail::concat("is at min_scale ", state_.scale, " and cannot fall further")
            : std::string("has fallen to 0: every scaled gradient is now 0 and unscaling turns "
                          "it into NaN; set min_scale"));
    MIXP_CHECK(options_.at_min_scale != AtMinScale::throw_error, message);
    if (!warned_) {
      warned_ = true;
      if (warn_) warn_(message);
    }
  }
  const float old_scale = state_.scale;
  state_ = next;
  record_change(old_scale, change, found ? first : std::nullopt);
  if (found) overflow_ceiling_ = std::min(overflow_ceiling_, old_scale);
  if (!found && change == ScaleChange::none && options_.dynamic && underflow_check_due()) {
    int64_t flushable = 0, counted = 0;
    double max_abs = 0.0;
    for (const PerOptimizer& p : per_optimizer_) {
      flushable += p.flushable;
      counted += p.counted;
      max_abs = std::max(max_abs, p.max_abs);
    }
    const float higher = float(double(state_.scale) * options_.growth_factor);
    const double largest_unscaled = max_abs / double(state_.scale);
    const bool wanted =
        counted > 0 && double(flushable) > options_.underflow_fraction * double(counted);
    if (wanted && std::isfinite(higher) && higher <= float(options_.max_scale) &&
        higher < overflow_ceiling_ && largest_unscaled * double(higher) <= kFp16Max) {
      state_.scale = higher;
      state_.growth_tracker = 0;
      record_change(old_scale, ScaleChange::underflow_growth, std::nullopt);
    }
  }
  per_optimizer_.clear();
  ++steps_;
}

bool GradScaler::underflow_check_due() const {
  return options_.underflow_fraction > 0.0 && steps_ % options_.underflow_check_interval == 0;
}

void GradScaler::update(double new_scale) {
  if (!options_.enabled) return;
  const float s = float(new_scale);
  MIXP_CHECK(std::isfinite(s) && s > 0.0f,
             "GradScaler::update: the new scale must be positive and finite in fp32, got ",
             new_scale);
  const float old_scale = state_.scale;
  state_.scale = s;
  record_change(old_scale, ScaleChange::set_by_user, std::nullopt);
  per_optimizer_.clear();
  ++steps_;
}

float GradScaler::get_scale() const { return options_.enabled ? state_.scale : 1.0f; }

bool GradScaler::found_inf(const optim::Optimizer& optimizer) const {
  for (const PerOptimizer& p : per_optimizer_) {
    if (p.optimizer == &optimizer) return p.found_inf;
  }
  return false;
}

std::vector<bool> GradScaler::found_inf_flags() const {
  std::vector<bool> flags;
  for (const PerOptimizer& p : per_optimizer_) flags.push_back(p.found_inf);
  return flags;
}

void GradScaler::set_found_inf_flags(const std::vector<bool>& flags) {
  MIXP_CHECK(flags.size() == per_optimizer_.size(), "GradScaler: ", flags.size(),
             " found-inf flags given for the ", per_optimizer_.size(),
             " optimizers unscaled since the last update");
  for (size_t i = 0; i < flags.size(); ++i) {
    MIXP_CHECK(per_optimizer_[i].stage == Stage::unscaled,
               "GradScaler: optimizer ", i, " was already stepped; set the flags before step()");
    per_optimizer_[i].found_inf = flags[i];
  }
}

std::map<std::string, double> GradScaler::state() const {
  if (!options_.enabled) return {};
  std::map<std::string, double> s = {
      {"scale", double(state_.scale)},
      {"growth_factor", options_.growth_factor},
      {"backoff_factor", options_.backoff_factor},
      {"growth_interval", double(options_.growth_interval)},
      {"_growth_tracker", double(state_.growth_tracker)},
      {"_consecutive_overflows", double(state_.consecutive_overflows)},
      {"_steps", double(steps_)},
  };
  if (options_.underflow_fraction > 0.0 && std::isfinite(overflow_ceiling_))
    s["_overflow_ceiling"] = double(overflow_ceiling_);
  return s;
}

StateDict GradScaler::state_dict() const {
  StateDict out;
  for (const auto& [key, value] : state()) out.set_real(key, value);
  return out;
}

void GradScaler::load_state_dict(const StateDict& state) {
  std::map<std::string, double> values;
  for (const auto& [key, text] : state.values) values[key] = state.get_real(key);
  load_state(values);
}

void GradScaler::load_state(const std::map<std::string, double>& state) {
  if (!options_.enabled) return;  // as PyTorch
  MIXP_CHECK(!state.empty(),
             "GradScaler::load_state: the state is empty, possibly because it "
             "was saved from a disabled GradScaler");
  auto get = [&](const char* key, bool required, double fallback) {
    const auto it = state.find(key);
    MIXP_CHECK(it != state.end() || !required, "GradScaler::load_state: no '", key, "'");
    const double v = it == state.end() ? fallback : it->second;
    MIXP_CHECK(std::isfinite(v), "GradScaler::load_state: '", key, "' is ", v);
    return v;
  };
  auto get_count = [&](const char* key, bool required) {
    const double v = get(key, required, 0.0);
    MIXP_CHECK(v >= 0.0 && v <= 9.0e15 && v == std::floor(v), "GradScaler::load_state: '", key,
               "' must be a non-negative integer, got ", v);
    return int64_t(v);
  };
  GradScalerOptions options = options_;
  const double scale = get("scale", true, 0.0);
  options.growth_factor = get("growth_factor", true, 0.0);
  options.backoff_factor = get("backoff_factor", true, 0.0);
  options.growth_interval = get_count("growth_interval", true);
  const int64_t tracker = get_count("_growth_tracker", true);
  const int64_t overflows = get_count("_consecutive_overflows", false);
  const int64_t steps = get_count("_steps", false);
  const auto ceiling = state.find("_overflow_ceiling");
  MIXP_CHECK(ceiling == state.end() || (std::isfinite(ceiling->second) && ceiling->second > 0),
             "GradScaler::load_state: '_overflow_ceiling' must be positive and finite, got ",
             ceiling == state.end() ? 0.0 : ceiling->second);
  options.validate();  // the bounds and init_scale are the scaler's own, valid already
  // A scale that collapsed to 0 is a state PyTorch can save, so it loads; the bounds still hold.
  const float s = float(scale);
  MIXP_CHECK(std::isfinite(s) && s >= float(options.min_scale) && s <= float(options.max_scale),
             "GradScaler::load_state: 'scale' ", scale,
             " is not finite in fp32 within "
             "[min_scale, max_scale] = [",
             options.min_scale, ", ", options.max_scale, "]");
  MIXP_CHECK(tracker < options.growth_interval, "GradScaler::load_state: '_growth_tracker' ",
             tracker, " must be below growth_interval ", options.growth_interval);
  options_ = options;
  state_ = ScaleState{.scale = s,
                      .growth_tracker = tracker,
                      .consecutive_overflows = std::min(overflows, options.hysteresis)};
  steps_ = steps;
  overflow_ceiling_ =
      ceiling == state.end() ? std::numeric_limits<float>::infinity() : float(ceiling->second);
  per_optimizer_.clear();
}

void GradScaler::set_warning_handler(std::function<void(const std::string&)> handler) {
  warn_ = std::move(handler);
}

}  // namespace mixp::amp
