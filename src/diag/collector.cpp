#include "mixp/diag/collector.h"

#include <cmath>
#include <cstdio>

#include "mixp/autograd.h"
#include "mixp/error.h"

namespace mixp::diag {

const char* name_of(Role role) {
  switch (role) {
    case Role::activation: return "activation";
    case Role::activation_gradient: return "activation_gradient";
    case Role::weight: return "weight";
    case Role::weight_gradient: return "weight_gradient";
  }
  return "?";
}

Collector::Collector(nn::Module& model, CollectorOptions options,
                     const std::vector<std::string>& layers)
    : options_(std::move(options)) {
  MIXP_CHECK(options_.every >= 1, "Collector: every must be at least 1, got ", options_.every);
  MIXP_CHECK(options_.max_elements >= 1, "Collector: max_elements must be at least 1, got ",
             options_.max_elements);
  const auto all = model.named_modules();
  if (layers.empty()) {
    for (const auto& [name, m] : all) {
      if (!m->own_parameter_names().empty()) {
        names_.push_back(name);
        modules_.push_back(m);
      }
    }
  } else {
    for (const std::string& wanted : layers) {
      nn::Module* found = nullptr;
      for (const auto& [name, m] : all)
        if (name == wanted) found = m;
      MIXP_CHECK(found != nullptr, "Collector: the model has no module named '", wanted, "'");
      names_.push_back(wanted);
      modules_.push_back(found);
    }
  }
  MIXP_CHECK(!modules_.empty(),
             "Collector: no layer to hook (the model has no module with "
             "parameters of its own)");
  for (size_t i = 0; i < modules_.size(); ++i) {
    const std::string name = names_[i];
    hook_ids_.push_back(modules_[i]->add_forward_hook([this, name](nn::Module&, const Tensor& y) {
      if (!collecting_) return y;
      record(name, Role::activation, y, 1.0);
      const double scale = scale_;
      return autograd::with_gradient_hook(y, [this, name, scale](const Tensor& g) {
        record(name, Role::activation_gradient, g, scale);
      });
    }));
  }
}

Collector::~Collector() {
  for (size_t i = 0; i < modules_.size(); ++i) modules_[i]->remove_forward_hook(hook_ids_[i]);
}

void Collector::begin_step(int64_t step, double loss_scale) {
  MIXP_CHECK(std::isfinite(loss_scale) && loss_scale > 0,
             "Collector: the loss scale must be positive and finite, got ", loss_scale);
  step_ = step;
  scale_ = loss_scale;
  collecting_ = step % options_.every == 0;
}

void Collector::end_step() {
  if (collecting_) {
    for (size_t i = 0; i < modules_.size(); ++i) {
      const std::string prefix = names_[i].empty() ? "" : names_[i] + ".";
      for (const auto& [name, p] : modules_[i]->named_parameters()) {
        if (name.find('.') != std::string::npos) continue;  // a child's, recorded with it
        record(prefix + name, Role::weight, *p, 1.0);
        if (p->grad().defined()) record(prefix + name, Role::weight_gradient, p->grad(), scale_);
      }
    }
  }
  collecting_ = false;
}

void Collector::record(const std::string& name, Role role, const Tensor& t, double divide_by) {
  const bool gradient = role == Role::activation_gradient || role == Role::weight_gradient;
  std::vector<FormatQuery> queries = options_.queries;
  if (gradient && divide_by != 1.0) {
    for (const FormatQuery& q : options_.queries) {
      FormatQuery scaled = q;
      scaled.scale = q.scale * divide_by;
      char at[32];
      std::snprintf(at, sizeof at, "@%g", divide_by);
      scaled.label = (q.label.empty() ? q.format.name() : q.label) + at;
      queries.push_back(scaled);
    }
  }
  std::vector<double> values = sample(t, options_.max_elements).to_vector();
  if (divide_by != 1.0)
    for (double& v : values) v /= divide_by;
  LayerRecord r;
  r.step = step_;
  r.name = name;
  r.role = role;
  r.loss_scale = scale_;
  r.numel = t.numel();
  r.stats = value_stats(values, queries);
  records_.push_back(std::move(r));
}

}  // namespace mixp::diag
