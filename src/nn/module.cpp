#include "mixp/nn/module.h"

#include "mixp/error.h"

namespace mixp::nn {

std::vector<std::pair<std::string, Tensor*>> Module::named_parameters() {
  std::vector<std::pair<std::string, Tensor*>> out;
  collect_parameters("", out, nullptr);
  return out;
}

std::vector<Tensor> Module::parameters() {
  std::vector<Tensor> out;
  for (auto& [name, p] : named_parameters()) out.push_back(*p);
  return out;
}

std::vector<std::pair<std::string, Tensor*>> Module::named_buffers() {
  std::vector<std::pair<std::string, Tensor*>> out;
  collect_buffers("", out);
  return out;
}

std::vector<bool> Module::norm_parameter_flags() {
  std::vector<std::pair<std::string, Tensor*>> params;
  std::vector<bool> norms;
  collect_parameters("", params, &norms);
  return norms;
}

void Module::train(bool training) {
  training_ = training;
  on_mode_change();
  for (auto& [name, child] : children_) child->train(training);
}

std::string Module::pretty_print(int indent) const {
  std::string out = type_name() + "(" + extra_repr();
  if (children_.empty()) return out + ")";
  const std::string pad(size_t(indent + 2), ' ');
  out += "\n";
  for (const auto& [name, child] : children_) {
    out += pad + "(" + name + "): " + child->pretty_print(indent + 2) + "\n";
  }
  return out + std::string(size_t(indent), ' ') + ")";
}

std::vector<std::pair<std::string, Module*>> Module::named_modules() {
  std::vector<std::pair<std::string, Module*>> out;
  collect_modules("", out);
  return out;
}

void Module::collect_modules(const std::string& name,
                             std::vector<std::pair<std::string, Module*>>& out) {
  out.emplace_back(name, this);
  for (auto& [child_name, child] : children_)
    child->collect_modules(name.empty() ? child_name : name + "." + child_name, out);
}

std::vector<std::string> Module::own_parameter_names() const {
  std::vector<std::string> out;
  for (const auto& [name, p] : parameters_) out.push_back(name);
  return out;
}

int64_t Module::add_forward_hook(ForwardHook hook) {
  MIXP_CHECK(hook != nullptr, type_name(), ": add_forward_hook of an empty hook");
  forward_hooks_.emplace_back(next_hook_id_, std::move(hook));
  return next_hook_id_++;
}

void Module::remove_forward_hook(int64_t id) {
  std::erase_if(forward_hooks_, [id](const auto& h) { return h.first == id; });
}

int64_t Module::add_forward_pre_hook(ForwardPreHook hook) {
  MIXP_CHECK(hook != nullptr, type_name(), ": add_forward_pre_hook of an empty hook");
  forward_pre_hooks_.emplace_back(next_hook_id_, std::move(hook));
  return next_hook_id_++;
}

void Module::remove_forward_pre_hook(int64_t id) {
  std::erase_if(forward_pre_hooks_, [id](const auto& h) { return h.first == id; });
}

void Module::run_forward_pre_hooks(const Tensor& input) {
  for (auto& [id, hook] : forward_pre_hooks_) hook(*this, input);
}

Tensor Module::run_forward_hooks(Tensor output) {
  for (auto& [id, hook] : forward_hooks_) output = hook(*this, output);
  return output;
}

Tensor& Module::register_parameter(const std::string& name, Tensor value) {
  MIXP_CHECK(value.defined() && is_floating(value.dtype()), type_name(), ": parameter '", name,
             "' must be a floating tensor");
  for (const auto& [n, p] : parameters_) {
    MIXP_ASSERT(n != name, "parameter '", name, "' registered twice in ", type_name());
  }
  if (value.tag() != MemoryTag::parameter) value = value.clone(MemoryTag::parameter);
  value = value.detach();
  value.set_requires_grad(true);
  parameters_.emplace_back(name, std::make_unique<Tensor>(std::move(value)));
  return *parameters_.back().second;
}

Tensor& Module::register_buffer(const std::string& name, Tensor value) {
  buffers_.emplace_back(name, std::make_unique<Tensor>(std::move(value)));
  return *buffers_.back().second;
}

void Module::collect_parameters(const std::string& prefix,
                                std::vector<std::pair<std::string, Tensor*>>& out,
                                std::vector<bool>* norms) {
  for (auto& [name, p] : parameters_) {
    out.emplace_back(prefix + name, p.get());
    if (norms) norms->push_back(is_norm());
  }
  for (auto& [name, child] : children_) child->collect_parameters(prefix + name + ".", out, norms);
}

void Module::collect_buffers(const std::string& prefix,
                             std::vector<std::pair<std::string, Tensor*>>& out) {
  for (auto& [name, b] : buffers_) out.emplace_back(prefix + name, b.get());
  for (auto& [name, child] : children_) child->collect_buffers(prefix + name + ".", out);
}

void replace_parameters(Module& module, const std::vector<Tensor>& new_values) {
  const auto params = module.named_parameters();
  MIXP_CHECK(params.size() == new_values.size(), "replace_parameters: the module has ",
             params.size(), " parameters, got ", new_values.size(), " new values");
  for (size_t i = 0; i < params.size(); ++i) {
    const Tensor& v = new_values[i];
    MIXP_CHECK(v.defined() && is_floating(v.dtype()), "replace_parameters: the new value of '",
               params[i].first, "' is not a floating tensor");
    MIXP_CHECK(v.shape() == params[i].second->shape(), "replace_parameters: '", params[i].first,
               "' has shape ", params[i].second->shape().to_string(), ", the new value ",
               v.shape().to_string());
  }
  for (size_t i = 0; i < params.size(); ++i) *params[i].second = new_values[i];
}

}  // namespace mixp::nn
