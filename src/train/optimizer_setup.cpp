// The optimizer and schedule choices of a run.
#include "train/optimizer_setup.h"

#include <algorithm>
#include <cmath>

#include "mixp/error.h"
#include "mixp/optim/adam.h"
#include "mixp/optim/adamw.h"
#include "mixp/optim/sgd.h"

namespace mixp::train {
namespace {

// Philox stream of the optimizers' stochastic rounding ("SR"), apart from init and data; the
// k-th optimizer of a run draws from stream kRoundingStream + k.
constexpr uint64_t kRoundingStream = 0x5352;

struct GroupSettings {
  double weight_decay;
  std::array<double, 2> betas;
  PhiloxState rounding;
};

// Adam and AdamW: their options have the same fields.
template <typename AdamKind, typename Options>
std::unique_ptr<optim::Optimizer> make_adam(std::vector<Tensor> params, const TrainOptions& o,
                                            const amp::Preset& preset, const GroupSettings& g) {
  return std::make_unique<AdamKind>(std::move(params),
                                    Options{.lr = o.lr.value_or(1e-3),
                                            .betas = g.betas,
                                            .eps = o.optimizer.eps,
                                            .weight_decay = g.weight_decay,
                                            .precision = preset.optimizer_precision,
                                            .rounding = g.rounding,
                                            .state_dtype = optimizer_state_dtype(o)});
}

std::unique_ptr<optim::Optimizer> make_one(std::vector<Tensor> params, const TrainOptions& o,
                                           const amp::Preset& preset, const GroupSettings& g) {
  const OptimizerConfig& c = o.optimizer;
  if (c.name == "adam")
    return make_adam<optim::Adam, optim::AdamOptions>(std::move(params), o, preset, g);
  if (c.name == "adamw")
    return make_adam<optim::AdamW, optim::AdamWOptions>(std::move(params), o, preset, g);
  return std::make_unique<optim::Sgd>(std::move(params),
                                      optim::SgdOptions{.lr = o.lr.value_or(1e-3),
                                                        .momentum = c.momentum,
                                                        .weight_decay = g.weight_decay,
                                                        .nesterov = c.nesterov,
                                                        .precision = preset.optimizer_precision,
                                                        .rounding = g.rounding});
}

}  // namespace

void validate_optimizer_options(const TrainOptions& o) {
  const OptimizerConfig& c = o.optimizer;
  MIXP_CHECK(c.name == "sgd" || c.name == "adam" || c.name == "adamw", "unknown optimizer '",
             c.name, "' (sgd, adam or adamw)");
  const bool sgd = c.name == "sgd";
  MIXP_CHECK(!c.weight_decay || (std::isfinite(*c.weight_decay) && *c.weight_decay >= 0),
             "the weight decay must be >= 0, got ", c.weight_decay.value_or(0));
  MIXP_CHECK(std::isfinite(c.momentum) && c.momentum >= 0 && c.momentum < 1,
             "the momentum must be in [0, 1), got ", c.momentum);
  MIXP_CHECK(sgd || (c.momentum == 0 && !c.nesterov), "momentum and nesterov apply to sgd; ",
             c.name, " keeps its own moments (betas)");
  MIXP_CHECK(!c.nesterov || c.momentum > 0, "nesterov needs a momentum > 0");
  MIXP_CHECK(!sgd || !c.betas, "betas apply to adam and adamw, not sgd");
  if (c.betas)
    for (const double b : *c.betas)
      MIXP_CHECK(std::isfinite(b) && b >= 0 && b < 1, "each beta must be in [0, 1), got ", b);
  MIXP_CHECK(std::isfinite(c.eps) && c.eps >= 0, "eps must be >= 0, got ", c.eps);
  MIXP_CHECK(!sgd || o.optimizer_state.empty() || o.optimizer_state == "f32",
             "sgd keeps fp32 momentum; the optimizer state dtype applies to adam and adamw");
  const ScheduleConfig& s = o.schedule;
  MIXP_CHECK(
      s.name.empty() || s.name == "constant" || s.name == "cosine" || s.name == "warmup-cosine",
      "unknown schedule '", s.name, "' (constant, cosine or warmup-cosine)");
  MIXP_CHECK(!s.warmup_steps || s.name == "warmup-cosine" || s.name.empty(),
             "the warmup steps apply to the warmup-cosine schedule, not ", s.name);
  MIXP_CHECK(!s.warmup_steps || *s.warmup_steps >= 0, "the warmup steps must be >= 0, got ",
             s.warmup_steps.value_or(0));
  MIXP_CHECK(!s.min_lr || s.name != "constant",
             "the minimum learning rate applies to the cosine "
             "schedules, not constant");
  const double lr = o.lr.value_or(1e-3);
  MIXP_CHECK(!s.min_lr || (*s.min_lr >= 0 && *s.min_lr <= lr),
             "the minimum learning rate must be in [0, lr = ", lr, "], got ", s.min_lr.value_or(0));
}

std::vector<OptimizerGroup> make_optimizers(
    const std::vector<std::pair<std::string, Tensor>>& params, const TrainOptions& o,
    const amp::Preset& preset, bool lm, const std::vector<Tensor>& whole) {
  MIXP_ASSERT(whole.size() == params.size());
  const bool adamw = o.optimizer.name == "adamw";
  const std::array<double, 2> betas = o.optimizer.betas.value_or(
      lm ? std::array<double, 2>{0.9, 0.99} : std::array<double, 2>{0.9, 0.999});
  const double decay = o.optimizer.weight_decay.value_or(adamw ? (lm ? 0.1 : 0.01) : 0.0);
  std::vector<OptimizerGroup> groups;
  auto add = [&](const std::vector<std::pair<std::string, Tensor>>& members, double wd) {
    if (members.empty()) return;
    std::vector<Tensor> tensors;
    OptimizerGroup g;
    for (const auto& [name, t] : members) {
      tensors.push_back(t);
      g.names.push_back(name);
    }
    const PhiloxState rounding{.seed = o.seed, .stream = kRoundingStream + groups.size()};
    g.optimizer = make_one(std::move(tensors), o, preset,
                           {.weight_decay = wd, .betas = betas, .rounding = rounding});
    groups.push_back(std::move(g));
  };
  if (!lm) {
    add(params, decay);
    return groups;
  }
  std::vector<std::pair<std::string, Tensor>> matrices, vectors;
  for (size_t i = 0; i < params.size(); ++i)
    (whole[i].ndim() >= 2 ? matrices : vectors).push_back(params[i]);
  add(matrices, decay);
  add(vectors, 0.0);
  return groups;
}

std::unique_ptr<optim::LrSchedule> make_schedule(const TrainOptions& o, bool lm, int64_t total) {
  const double lr = o.lr.value_or(1e-3);
  const std::string name = !o.schedule.name.empty() ? o.schedule.name
                           : lm                     ? "warmup-cosine"
                                                    : "cosine";
  if (name == "constant") return std::make_unique<optim::ConstantLr>(lr);
  const int64_t warmup =
      name == "cosine" ? 0 : o.schedule.warmup_steps.value_or(std::min<int64_t>(100, total / 10));
  MIXP_CHECK(warmup <= total, "the warmup steps (", warmup, ") exceed the run's ", total, " steps");
  return std::make_unique<optim::WarmupCosineLr>(
      optim::WarmupCosineOptions{.peak_lr = lr,
                                 .min_lr = o.schedule.min_lr.value_or(lm ? lr / 10 : lr / 100),
                                 .warmup_steps = warmup,
                                 .total_steps = total});
}

}  // namespace mixp::train
