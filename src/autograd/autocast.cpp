// Autocast lives with autograd (layer 4), not in amp/: every op consults it when it runs, and
// the backward engine turns it off, so it must sit below them. Its public header stays
// mixp/amp/autocast.h, with the rest of mixed precision.
#include "mixp/amp/autocast.h"

#include "autograd/autocast_internal.h"

#include <array>
#include <map>
#include <memory>
#include <tuple>
#include <utility>

#include "mixp/autograd.h"
#include "mixp/error.h"

namespace mixp::amp {
namespace {

struct CacheEntry {
  // A weak reference to the source: the key's pointer may be reused by a new tensor once the
  // source is gone, and that tensor must not hit (PyTorch's cache keeps a weakref likewise).
  std::weak_ptr<TensorImpl> source;
  uint64_t version = 0;
  Tensor cast;
};

// (source, target dtype, grad mode at the cast): a cast made under NoGradGuard has no node, so
// it must not serve a use that needs gradients.
using CacheKey = std::tuple<const TensorImpl*, DType, bool>;

struct State {
  bool enabled = false;
  DType dtype = DType::bf16;
  int enabled_scopes = 0;  // enabled Autocast scopes alive on this thread
  int suspended = 0;       // op bodies (CastInputs) alive on this thread
  std::map<CacheKey, CacheEntry> cache;
  uint64_t casts = 0, hits = 0;
  std::array<uint64_t, size_t(kOpKindCount)> calls{};
};

thread_local State t_state;

bool eligible(DType d) { return d == DType::f32 || d == DType::f16 || d == DType::bf16; }

int width_rank(DType d) {
  switch (d) {
    case DType::f64: return 3;
    case DType::f32: return 2;
    case DType::f16:
    case DType::bf16: return 1;
    default: return 0;  // not a dtype that promotion considers (fp8, integers)
  }
}

// A parameter is cast through the cache; anything else directly.
Tensor cast_to(const Tensor& t, DType target) {
  const bool cacheable = t.dtype() == DType::f32 && target == t_state.dtype &&
                         t_state.enabled_scopes > 0 && t.requires_grad() && t.is_leaf();
  if (!cacheable) return t.to(target);
  const CacheKey key{t.impl(), target, grad_mode_enabled()};
  auto it = t_state.cache.find(key);
  if (it != t_state.cache.end()) {
    const CacheEntry& e = it->second;
    const std::shared_ptr<autograd::Node>& node = e.cast.grad_fn();
    // A backward pass frees the cast's node (its edges are cleared): cast again then, so that
    // the next forward records a live path to the leaf.
    const bool node_freed = node && node->next.empty();
    if (!e.source.expired() && e.version == t.version() && !node_freed) {
      ++t_state.hits;
      return e.cast;
    }
  }
  Tensor cast = t.to(target);
  t_state.cache.insert_or_assign(
      key, CacheEntry{.source = t.impl_ptr(), .version = t.version(), .cast = cast});
  ++t_state.casts;
  return cast;
}

}  // namespace

Autocast::Autocast(DType dtype, bool enabled)
    : previous_enabled_(t_state.enabled), previous_dtype_(t_state.dtype), enabled_(enabled) {
  MIXP_CHECK(dtype == DType::bf16 || dtype == DType::f16,
             "Autocast: the dtype must be bf16 or f16, got ", name_of(dtype));
  t_state.enabled = enabled;
  t_state.dtype = dtype;
  if (enabled) ++t_state.enabled_scopes;
}

Autocast::~Autocast() {
  t_state.enabled = previous_enabled_;
  t_state.dtype = previous_dtype_;
  if (enabled_ && --t_state.enabled_scopes == 0) t_state.cache.clear();
}

bool autocast_enabled() { return t_state.enabled && t_state.suspended == 0; }
DType autocast_dtype() { return t_state.dtype; }

CastInputs::CastInputs(std::vector<Tensor> tensors, std::optional<DType> output_dtype, bool suspend)
    : tensors_(std::move(tensors)), output_dtype_(output_dtype), suspend_(suspend) {
  if (suspend_) ++t_state.suspended;
}

CastInputs::~CastInputs() {
  if (suspend_) --t_state.suspended;
}

Tensor CastInputs::output(Tensor result) const {
  if (!output_dtype_ || !result.defined() || !is_floating(result.dtype()) ||
      result.dtype() == *output_dtype_) {
    return result;
  }
  return result.to(*output_dtype_);
}

std::vector<Tensor> CastInputs::output(std::vector<Tensor> results) const {
  for (Tensor& r : results) r = output(std::move(r));
  return results;
}

bool detail::reads_mixed_inputs(const Tensor& a, const Tensor& b) {
  if (!a.defined() || !b.defined() || !(a.shape() == b.shape())) return false;
  auto narrow = [](DType d) { return d == DType::bf16 || d == DType::f16; };
  return (a.dtype() == DType::f32 && narrow(b.dtype())) ||
         (narrow(a.dtype()) && b.dtype() == DType::f32);
}

CastInputs autocast_inputs(const OpInfo& row, std::span<const Tensor* const> inputs) {
  ++t_state.calls[size_t(row.kind)];
  std::vector<Tensor> tensors;
  tensors.reserve(inputs.size());
  for (const Tensor* t : inputs) tensors.push_back(t ? *t : Tensor());
  if (!autocast_enabled()) return CastInputs(std::move(tensors), std::nullopt, false);

  std::optional<DType> output_dtype;
  switch (row.policy) {
    case CastPolicy::keep: break;
    case CastPolicy::banned:
      MIXP_CHECK(false, row.name, " is banned under autocast (", name_of(t_state.dtype),
                 "): its result is not safe in low precision; use ",
                 row.alternative ? row.alternative : "an fp32 region (Autocast(dtype, false))",
                 " instead");
      break;
    case CastPolicy::lower_precision:
      for (Tensor& t : tensors) {
        if (t.defined() && eligible(t.dtype()) && t.dtype() != t_state.dtype) {
          t = cast_to(t, t_state.dtype);
        }
      }
      break;
    case CastPolicy::fp32_compute: {
      std::optional<DType> first;
      for (Tensor& t : tensors) {
        if (!t.defined() || !is_floating(t.dtype())) continue;
        if (!first) first = t.dtype();
        if (row.fp32_inside) continue;  // the kernels widen as they read
        if (t.dtype() == DType::f16 || t.dtype() == DType::bf16) t = t.to(DType::f32);
      }
      if (!row.fp32_output && first && *first != DType::f32 && eligible(*first)) {
        output_dtype = first;
      }
      break;
    }
    case CastPolicy::promote: {
      int widest = 0;
      bool has_f16 = false, has_bf16 = false;
      DType target = DType::f32;
      for (const Tensor& t : tensors) {
        if (!t.defined()) continue;
        const int rank = width_rank(t.dtype());
        has_f16 = has_f16 || t.dtype() == DType::f16;
        has_bf16 = has_bf16 || t.dtype() == DType::bf16;
        if (rank > widest) {
          widest = rank;
          target = t.dtype();
        }
      }
      if (widest == 1 && has_f16 && has_bf16) target = DType::f32;  // neither holds the other
      if (row.fp32_inside && tensors.size() == 2 &&
          detail::reads_mixed_inputs(tensors[0], tensors[1])) {
        break;
      }
      for (Tensor& t : tensors) {
        if (t.defined() && width_rank(t.dtype()) > 0 && t.dtype() != target) t = t.to(target);
      }
      break;
    }
  }
  return CastInputs(std::move(tensors), output_dtype, true);
}

CastInputs autocast_inputs(OpKind op, std::initializer_list<const Tensor*> inputs) {
  return autocast_inputs(op_info(op),
                         std::span<const Tensor* const>(inputs.begin(), inputs.size()));
}

CastInputs autocast_inputs(OpKind op, std::span<const Tensor> inputs) {
  std::vector<const Tensor*> pointers;
  pointers.reserve(inputs.size());
  for (const Tensor& t : inputs) pointers.push_back(&t);
  return autocast_inputs(op_info(op), pointers);
}

WeightCacheStats weight_cache_stats() {
  return WeightCacheStats{
      .entries = t_state.cache.size(), .casts = t_state.casts, .hits = t_state.hits};
}

uint64_t policy_calls(OpKind kind) { return t_state.calls[size_t(kind)]; }

int detail::autocast_suspended() { return t_state.suspended; }

}  // namespace mixp::amp
