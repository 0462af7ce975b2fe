// The backward engine: dependency counting over the recorded graph, then nodes in reverse
// creation order (highest sequence number first), which makes the order deterministic.
#include "autograd/engine.h"

#include <atomic>
#include <cstring>
#include <queue>
#include <unordered_map>
#include <unordered_set>

#include "autograd/autocast_internal.h"
#include "mixp/amp/autocast.h"
#include "mixp/error.h"
#include "mixp/ops.h"
#include "tensor/autograd_hooks.h"
#include "tensor/tensor_impl.h"

namespace mixp {
namespace {
thread_local bool t_grad_mode = true;
std::atomic<uint64_t> g_next_sequence_nr{0};
}  // namespace

bool grad_mode_enabled() { return t_grad_mode; }

NoGradGuard::NoGradGuard() : previous_(t_grad_mode) { t_grad_mode = false; }
NoGradGuard::~NoGradGuard() { t_grad_mode = previous_; }

namespace autograd {

Node::Node() : sequence_nr(g_next_sequence_nr.fetch_add(1, std::memory_order_relaxed)) {}

SavedTensor::SavedTensor(const Tensor& t)
    : data_(t.defined() ? t.detach() : Tensor()), version_(t.defined() ? t.version() : 0) {}

Tensor SavedTensor::get() const {
  MIXP_CHECK(!data_.defined() || data_.version() == version_,
             "backward: a tensor saved for backward (shape ", data_.shape().to_string(), ", ",
             name_of(data_.dtype()), ") was modified in place after it was saved");
  return data_;
}

Tensor add_gradients(const Tensor& a, const Tensor& b) {
  NoGradGuard no_grad;
  return ops::add(a, b);
}

bool any_requires_grad(std::initializer_list<const Tensor*> inputs) {
  for (const Tensor* t : inputs) {
    if (t && t->defined() && t->requires_grad()) return true;
  }
  return false;
}

namespace {

// True where the leaf may take `g` itself as its new .grad instead of a copy, as PyTorch's
// AccumulateGrad steals a gradient nothing else refers to: `g` is the only handle on its
// TensorImpl and on a storage it fills exactly (no view of a larger buffer, which would keep
// the rest alive), was allocated as a gradient (so the memory report counts it as before), and
// has the leaf's gradient dtype, shape and device. A layer's weight gradient written by its
// kernel then stays where it was written: copying it cost 6-9% of an mlp step.
bool can_adopt(const Tensor& g, const Tensor& variable, DType dtype) {
  const TensorImpl& impl = *g.impl();
  return g.impl_ptr().use_count() == 1 && impl.storage.use_count() == 1 && impl.offset == 0 &&
         impl.storage->bytes == size_t(g.numel()) * size_of(dtype) &&
         impl.storage->tag == MemoryTag::gradient && g.dtype() == dtype &&
         g.shape() == variable.shape() && g.device() == variable.device() &&
         !impl.autograd.grad_fn && !impl.autograd.requires_grad;
}

// Adds incoming gradients into a leaf's .grad, in the leaf's gradient dtype.
struct AccumulateGrad : Node {
  std::shared_ptr<TensorImpl> leaf;

  std::vector<Tensor> apply(std::vector<Tensor>&& grads) override {
    Tensor g = std::move(grads[0]);
    if (!g.defined()) return {};
    Tensor variable(leaf);
    const DType dtype = variable.grad_dtype();
    Tensor current = variable.grad();
    const Tensor& storage = leaf->autograd.gradient_storage;
    const bool own_storage = storage.defined() && storage.dtype() == dtype;
    if (!current.defined() && !own_storage && can_adopt(g, variable, dtype)) {
      variable.set_grad(g);
    } else if (!current.defined()) {
      Tensor fresh = own_storage
                         ? storage
                         : empty(variable.shape(), dtype, MemoryTag::gradient, variable.device());
      fresh.copy_(g);
      variable.set_grad(fresh);
    } else {
      Tensor incoming = g.dtype() == dtype ? g : g.to(dtype);
      Tensor sum = add_gradients(current, incoming);
      current.copy_(sum);
    }
    if (leaf->autograd.on_accumulated) leaf->autograd.on_accumulated();
    return {};
  }
};

}  // namespace

Edge gradient_edge(const Tensor& t) {
  if (!t.defined() || !t.requires_grad()) return {};
  TensorImpl& impl = *t.impl();
  if (impl.autograd.grad_fn)
    return {.node = impl.autograd.grad_fn, .input_nr = impl.autograd.output_nr};
  std::shared_ptr<Node> acc = impl.autograd.grad_accumulator.lock();
  if (!acc) {
    auto node = std::make_shared<AccumulateGrad>();
    node->name = "accumulate_grad";
    node->leaf = t.impl_ptr();
    acc = node;
    impl.autograd.grad_accumulator = acc;
  }
  return {.node = acc, .input_nr = 0};
}

void set_history(Tensor& output, const std::shared_ptr<Node>& node, uint32_t output_nr) {
  TensorImpl& impl = *output.impl();
  impl.autograd.grad_fn = node;
  impl.autograd.output_nr = output_nr;
}

namespace {

struct ViewBackward : Node {
  Shape input_shape;
  std::vector<Tensor> apply(std::vector<Tensor>&& grads) override {
    return {grads[0].defined() ? grads[0].view(input_shape) : Tensor()};
  }
};

struct SliceBackward : Node {
  Shape input_shape;
  DType dtype = DType::f32;
  int64_t begin = 0;
  std::vector<Tensor> apply(std::vector<Tensor>&& grads) override {
    if (!grads[0].defined()) return {Tensor()};
    Tensor full = zeros(input_shape, grads[0].dtype(), MemoryTag::activation, grads[0].device());
    Tensor rows = full.slice(begin, begin + grads[0].shape()[0]);
    rows.copy_(grads[0]);
    return {full};
  }
};

struct HookBackward : Node {
  GradientHook hook;
  std::vector<Tensor> apply(std::vector<Tensor>&& grads) override {
    if (grads[0].defined()) hook(grads[0]);
    return {grads[0]};
  }
  void release() override { hook = nullptr; }
};

struct CastBackward : Node {
  DType input_dtype = DType::f32;
  std::vector<Tensor> apply(std::vector<Tensor>&& grads) override {
    return {grads[0].defined() ? grads[0].to(input_dtype) : Tensor()};
  }
};

void record_view(const Tensor& base, Tensor& view) {
  if (auto node = make_node<ViewBackward>("reshape", {&base})) {
    node->input_shape = base.shape();
    set_history(view, node);
  }
}

void record_slice(const Tensor& base, Tensor& rows, int64_t begin) {
  if (auto node = make_node<SliceBackward>("slice", {&base})) {
    node->input_shape = base.shape();
    node->begin = begin;
    set_history(rows, node);
  }
}

void record_cast(const Tensor& in, Tensor& out) {
  if (auto node = make_node<CastBackward>("to", {&in})) {
    node->input_dtype = in.dtype();
    set_history(out, node);
  }
}

const char* node_name(const Node& node) { return node.name; }

}  // namespace

void set_gradient_accumulated_hook(const Tensor& leaf, std::function<void()> hook) {
  MIXP_CHECK(leaf.defined() && leaf.requires_grad() && !leaf.impl()->autograd.grad_fn,
             "set_gradient_accumulated_hook: the tensor must be a leaf that requires a gradient");
  leaf.impl()->autograd.on_accumulated = std::move(hook);
}

void set_gradient_storage(const Tensor& leaf, const Tensor& storage) {
  MIXP_CHECK(leaf.defined() && leaf.requires_grad() && !leaf.impl()->autograd.grad_fn,
             "set_gradient_storage: the tensor must be a leaf that requires a gradient");
  MIXP_CHECK(!storage.defined() || storage.shape() == leaf.shape(), "set_gradient_storage: storage of shape ",
             storage.defined() ? storage.shape().to_string() : std::string(),
             " for a leaf of shape ", leaf.shape().to_string());
  leaf.impl()->autograd.gradient_storage = storage;
}

Tensor with_gradient_hook(const Tensor& t, GradientHook hook) {
  MIXP_CHECK(hook != nullptr, "with_gradient_hook: an empty hook");
  auto node = make_node<HookBackward>("gradient_hook", {&t});
  if (!node) return t;
  node->hook = std::move(hook);
  Tensor alias = t.detach();
  set_history(alias, node);
  return alias;
}

void run_backward(const std::vector<Tensor>& roots, const std::vector<Tensor>& grads) {
  MIXP_ASSERT(roots.size() == grads.size());
  NoGradGuard no_grad;
  // Backward computes in the dtypes the forward saved; a scope around backward() changes none.
  amp::Autocast no_autocast(amp::autocast_dtype(), /*enabled=*/false);
  amp::detail::Fp8Suspend no_fp8;

  // Every node reachable from the roots, and how many edges lead into each.
  std::unordered_map<Node*, std::shared_ptr<Node>> nodes;
  std::unordered_map<Node*, int> dependencies;
  std::vector<Node*> stack;
  std::vector<Edge> root_edges;
  for (const Tensor& r : roots) {
    Edge e = gradient_edge(r);
    root_edges.push_back(e);
    if (e.node && nodes.emplace(e.node.get(), e.node).second) stack.push_back(e.node.get());
  }
  while (!stack.empty()) {
    Node* n = stack.back();
    stack.pop_back();
    MIXP_CHECK(!n->next.empty() || dynamic_cast<AccumulateGrad*>(n) != nullptr,
               "backward: the graph through ", n->name,
               " was already freed by an earlier backward");
    for (const Edge& e : n->next) {
      if (!e.node) continue;
      ++dependencies[e.node.get()];
      if (nodes.emplace(e.node.get(), e.node).second) stack.push_back(e.node.get());
    }
  }

  // Gradients waiting for each node, one slot per output of the node.
  std::unordered_map<Node*, std::vector<Tensor>> buffers;
  auto deliver = [&](const Edge& e, const Tensor& g) {
    std::vector<Tensor>& buffer = buffers[e.node.get()];
    if (buffer.empty()) buffer.resize(e.node->num_outputs);
    Tensor& slot = buffer[e.input_nr];
    slot = slot.defined() ? add_gradients(slot, g) : g;
  };
  for (size_t i = 0; i < roots.size(); ++i) {
    if (root_edges[i].node) deliver(root_edges[i], grads[i]);
  }

  // A node runs once every edge into it has delivered (or delivered nothing); the latest
  // created runs first, so the order is deterministic.
  auto later_first = [](Node* a, Node* b) { return a->sequence_nr < b->sequence_nr; };
  std::priority_queue<Node*, std::vector<Node*>, decltype(later_first)> ready(later_first);
  for (auto& [node, holder] : nodes) {
    if (dependencies[node] == 0) ready.push(node);
  }
  while (!ready.empty()) {
    Node* node = ready.top();
    ready.pop();
    std::vector<Tensor> input_grads;
    auto buffer = buffers.find(node);
    if (buffer != buffers.end()) {
      std::vector<Tensor> output_grads = std::move(buffer->second);
      buffers.erase(buffer);
      input_grads = node->apply(std::move(output_grads));
    }
    node->release();
    const std::vector<Edge> edges = std::move(node->next);
    node->next.clear();
    MIXP_ASSERT(input_grads.empty() || input_grads.size() == edges.size(), "node ", node->name,
                " returned ", input_grads.size(), " gradients for ", edges.size(), " inputs");
    for (size_t i = 0; i < edges.size(); ++i) {
      const Edge& e = edges[i];
      if (!e.node) continue;
      if (i < input_grads.size() && input_grads[i].defined()) deliver(e, input_grads[i]);
      if (--dependencies[e.node.get()] == 0) ready.push(e.node.get());
    }
  }
}

}  // namespace autograd
}  // namespace mixp

// Tensor's views, slices, casts and backward() reach the engine through these hooks, the tensor
// layer being below autograd. The library's link interface names this symbol (CMakeLists.txt):
// a program linked with the static library gets this file, and the hooks, whatever it calls.
extern "C" const bool mixp_autograd_hooks_installed;
const bool mixp_autograd_hooks_installed = [] {
  mixp::detail::install_autograd_hooks({.record_view = mixp::autograd::record_view,
                                        .record_slice = mixp::autograd::record_slice,
                                        .record_cast = mixp::autograd::record_cast,
                                        .run_backward = mixp::autograd::run_backward,
                                        .node_name = mixp::autograd::node_name});
  return true;
}();
