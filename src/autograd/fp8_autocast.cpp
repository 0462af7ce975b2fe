// FP8 autocast's thread-local state, the per-site amax histories and the weight cache. Like
// Autocast's, this sits with autograd (below the ops that read it); its header is mixp/amp/fp8.h.
#include <cmath>
#include <limits>

#include "autograd/autocast_internal.h"
#include "mixp/amp/fp8.h"
#include "mixp/autograd.h"
#include "mixp/error.h"

namespace mixp::amp {
namespace {

struct Fp8ThreadState {
  Fp8State* state = nullptr;
  bool enabled = false;
  int enabled_scopes = 0;
  int suspended = 0;
  size_t next_site = 0;
};

thread_local Fp8ThreadState t_fp8;

// Philox streams of the FP4 recipes, apart from every other stream a run draws from.
constexpr uint64_t kHadamardStream = 0x4650344861640000ull;          // "FP4Had"
constexpr uint64_t kGradientRoundingStream = 0x4650345352000000ull;  // "FP4SR"

// The site kinds as they are stored in a checkpoint.
float kind_code(const std::string& kind) { return kind == "attention" ? 1.0f : 0.0f; }
std::string kind_name(float code) { return code == 1.0f ? "attention" : "linear"; }

}  // namespace

namespace detail {
Fp8Suspend::Fp8Suspend() { ++t_fp8.suspended; }
Fp8Suspend::~Fp8Suspend() { --t_fp8.suspended; }
}  // namespace detail

void Fp8Meta::record(float observed) {
  if (std::isnan(amax)) return;
  if (std::isnan(observed)) {
    amax = observed;
    return;
  }
  amax = std::max(amax, std::fabs(observed));
}

void Fp8Meta::update(const Fp8Recipe& recipe, DType fp8) {
  MIXP_CHECK(recipe.amax_history_len >= 1, "Fp8Recipe: amax_history_len must be at least 1, got ",
             recipe.amax_history_len);
  history.push_back(amax);
  if (int64_t(history.size()) > recipe.amax_history_len) {
    history.erase(history.begin(), history.end() - recipe.amax_history_len);
  }
  scale = delayed_scale(history, recipe.amax_algorithm, fp8_max(fp8), recipe.margin, scale);
  amax = 0.0f;
}

Fp8State::Fp8State(Fp8Recipe recipe) : recipe_(recipe) {
  MIXP_CHECK(recipe.amax_history_len >= 1, "Fp8Recipe: amax_history_len must be at least 1, got ",
             recipe.amax_history_len);
  MIXP_CHECK(recipe.margin >= 0 && recipe.margin <= 64,
             "Fp8Recipe: margin must be in [0, 64], got ", recipe.margin);
  if (recipe.fp4) {
    MIXP_CHECK(recipe.fp4->bf16_tail >= 0.0 && recipe.fp4->bf16_tail <= 1.0,
               "Fp4Recipe: bf16_tail is a fraction of the Linear layers in [0, 1], got ",
               recipe.fp4->bf16_tail);
  }
  set_seed(0);
}

void Fp8State::update() {
  if (extension_) extension_->update();
  for (auto& site : sites_) {
    for (Fp8Meta& m : site->metas) m.update(recipe_, fp8_dtype(recipe_.format, m.role));
  }
  weights_.clear();
}

std::vector<Fp8Meta>& Fp8State::metas(size_t site) {
  MIXP_CHECK(site < sites_.size(), "Fp8State: no site ", site, " (", sites_.size(), " sites)");
  return sites_[site]->metas;
}

std::shared_ptr<Fp8State::Site> Fp8State::site(size_t index, const std::string& kind,
                                               std::span<const Fp8Role> roles) {
  MIXP_ASSERT(index <= sites_.size(), "fp8 site ", index, " skipped (", sites_.size(), " sites)");
  if (index == sites_.size()) {
    auto s = std::make_shared<Site>();
    s->kind = kind;
    for (Fp8Role r : roles) {
      Fp8Meta m;
      m.role = r;
      s->metas.push_back(std::move(m));
    }
    sites_.push_back(s);
  }
  const std::shared_ptr<Site>& s = sites_[index];
  MIXP_CHECK(s->kind == kind && s->metas.size() == roles.size(), "FP8: GEMM site ", index,
             " was a ", s->kind, " and is now a ", kind,
             ": the model must reach the same FP8 layers in the same order every forward pass");
  return s;
}

Fp8Tensor Fp8State::cached_weight(const Tensor& weight, Fp8Meta& meta, bool record) {
  const TensorImpl* key = weight.impl();
  auto it = weights_.find(key);
  if (it != weights_.end() && !it->second.source.expired() &&
      it->second.version == weight.version()) {
    if (record && !it->second.recorded) {
      meta.record(it->second.q.amax);
      it->second.recorded = true;
    }
    return it->second.q;
  }
  MIXP_CHECK(weight.ndim() == 2, "FP8: a weight must be 2-D, got ", weight.shape().to_string());
  NoGradGuard no_grad;
  Fp8Tensor q = quantize(weight, fp8_dtype(recipe_.format, Fp8Role::weight), recipe_.scaling,
                         meta.scale, recipe_.mx_scale_rounding);
  if (record) meta.record(q.amax);
  CachedWeight entry;
  entry.source = weight.impl_ptr();
  entry.version = weight.version();
  entry.q = q;
  entry.recorded = record;
  weights_.insert_or_assign(key, std::move(entry));
  return q;
}

void Fp8State::set_fp4_layers(std::vector<Fp4Layer> layers) {
  fp4_index_.clear();
  for (size_t i = 0; i < layers.size(); ++i)
    if (layers[i].fp4) fp4_index_.emplace(layers[i].weight, i);
  fp4_layers_ = std::move(layers);
}

std::optional<size_t> Fp8State::fp4_layer_of(const Tensor& weight) const {
  if (!weight.defined()) return std::nullopt;
  const auto it = fp4_index_.find(weight.impl());
  if (it == fp4_index_.end()) return std::nullopt;
  return it->second;
}

void Fp8State::set_seed(uint64_t seed) {
  seed_ = seed;
  const PhiloxState signs{.seed = seed, .stream = kHadamardStream, .offset = 0};
  for (size_t j = 0; j < hadamard_signs_.size(); ++j)
    hadamard_signs_[j] = (philox_word(signs, j) & 1u) ? -1.0f : 1.0f;
}

void Fp8State::set_rounding_position(int64_t step, int64_t micro_batch) {
  MIXP_CHECK(step >= 0 && step < (int64_t{1} << 24) && micro_batch >= 0 && micro_batch < 256,
             "FP4 stochastic rounding: step ", step, " and micro-batch ", micro_batch,
             " must be below 2^24 and 256");
  rounding_step_ = step;
  rounding_micro_batch_ = micro_batch;
  if (extension_) extension_->begin(step, micro_batch);
}

PhiloxState Fp8State::gradient_rounding(size_t layer, int gemm) const {
  // A quantization draws one word per element, at most 2^32 of them: the step and the
  // micro-batch take the offset's upper 32 bits, the layer and the GEMM the stream.
  return {.seed = seed_,
          .stream = kGradientRoundingStream + uint64_t(layer) * 2 + uint64_t(gemm),
          .offset = (uint64_t(rounding_step_) << 40) | (uint64_t(rounding_micro_batch_) << 32)};
}

std::vector<std::pair<std::string, Tensor>> Fp8State::state() const {
  std::vector<std::pair<std::string, Tensor>> out;
  if (recipe_.fp4) {
    Tensor signs = empty({16}, DType::f32);
    std::copy(hadamard_signs_.begin(), hadamard_signs_.end(), signs.data<float>());
    out.emplace_back("fp8/fp4/hadamard_signs", signs);
  }
  for (size_t i = 0; i < sites_.size(); ++i) {
    const std::string prefix = "fp8/" + std::to_string(i) + "/";
    out.emplace_back(prefix + "kind", full({1}, kind_code(sites_[i]->kind)));
    for (size_t k = 0; k < sites_[i]->metas.size(); ++k) {
      const Fp8Meta& m = sites_[i]->metas[k];
      const std::string p = prefix + std::to_string(k) + "/";
      Tensor h = empty({int64_t(m.history.size())}, DType::f32);
      std::copy(m.history.begin(), m.history.end(), h.data<float>());
      out.emplace_back(p + "history", h);
      Tensor s = empty({3}, DType::f32);
      s.data<float>()[0] = float(m.role);
      s.data<float>()[1] = m.scale;
      s.data<float>()[2] = m.amax;
      out.emplace_back(p + "meta", s);
    }
  }
  return out;
}

StateDict Fp8State::state_dict() const {
  constexpr std::string_view kPrefix = "fp8/";
  StateDict out;
  for (auto& [name, t] : state()) out.tensors.emplace(name.substr(kPrefix.size()), std::move(t));
  if (recipe_.fp4) {
    out.values["linear_flops"] = std::to_string(linear_flops_[0]) + "," +
                                 std::to_string(linear_flops_[1]) + "," +
                                 std::to_string(linear_flops_[2]);
  }
  if (extension_) extension_->save(out);
  return out;
}

void Fp8State::load_state_dict(const StateDict& state) {
  std::map<std::string, Tensor> tensors;
  for (const auto& [name, t] : state.tensors) tensors.emplace("fp8/" + name, t);
  load_state(tensors);
  if (const auto it = state.values.find("linear_flops"); it != state.values.end()) {
    double f[3] = {0, 0, 0};
    MIXP_CHECK(std::sscanf(it->second.c_str(), "%lf,%lf,%lf", &f[0], &f[1], &f[2]) == 3,
               "Fp8State: linear_flops must be three numbers, got '", it->second, "'");
    linear_flops_ = {f[0], f[1], f[2]};
  }
  if (extension_) extension_->load(state);
}

void Fp8State::load_state(const std::map<std::string, Tensor>& tensors) {
  std::vector<std::shared_ptr<Site>> sites;
  auto get = [&](const std::string& name, int64_t min_size, int64_t max_size) -> const Tensor& {
    auto it = tensors.find(name);
    MIXP_CHECK(it != tensors.end(), "Fp8State: the state has no ", name);
    const Tensor& t = it->second;
    MIXP_CHECK(
        t.dtype() == DType::f32 && t.ndim() == 1 && t.numel() >= min_size && t.numel() <= max_size,
        "Fp8State: ", name, " must be f32 with ", min_size, "..", max_size, " elements, got ",
        name_of(t.dtype()), " ", t.shape().to_string());
    return t;
  };
  size_t entries = 0;
  for (size_t i = 0; tensors.count("fp8/" + std::to_string(i) + "/kind"); ++i) {
    const std::string prefix = "fp8/" + std::to_string(i) + "/";
    auto site = std::make_shared<Site>();
    site->kind = kind_name(get(prefix + "kind", 1, 1).data<float>()[0]);
    ++entries;
    for (size_t k = 0; tensors.count(prefix + std::to_string(k) + "/meta"); ++k) {
      const std::string p = prefix + std::to_string(k) + "/";
      const Tensor& meta = get(p + "meta", 3, 3);
      const Tensor& history = get(p + "history", 0, recipe_.amax_history_len);
      entries += 2;
      Fp8Meta m;
      const float role = meta.data<float>()[0];
      MIXP_CHECK(role == 0.0f || role == 1.0f || role == 2.0f, "Fp8State: ", p, "meta has role ",
                 role);
      m.role = Fp8Role(int(role));
      m.scale = meta.data<float>()[1];
      m.amax = meta.data<float>()[2];
      MIXP_CHECK(std::isfinite(m.scale) && m.scale > 0.0f, "Fp8State: ", p, "meta has scale ",
                 m.scale);
      m.history.assign(history.data<float>(), history.data<float>() + history.numel());
      site->metas.push_back(std::move(m));
    }
    sites.push_back(site);
  }
  if (recipe_.fp4) {
    const Tensor& signs = get("fp8/fp4/hadamard_signs", 16, 16);
    for (int64_t j = 0; j < 16; ++j) {
      const float v = signs.data<float>()[j];
      MIXP_CHECK(v == 1.0f || v == -1.0f, "Fp8State: fp8/fp4/hadamard_signs holds ", v,
                 " at position ", j, "; a sign is +1 or -1");
    }
    std::copy(signs.data<float>(), signs.data<float>() + 16, hadamard_signs_.begin());
    ++entries;
  }
  size_t fp8_names = 0;
  for (const auto& [name, t] : tensors) fp8_names += name.rfind("fp8/", 0) == 0;
  MIXP_CHECK(fp8_names == entries, "Fp8State: ", fp8_names - entries,
             " fp8/ entries of the state belong to no site");
  sites_ = std::move(sites);
  weights_.clear();
}

Fp8Autocast::Fp8Autocast(Fp8State& state, bool enabled)
    : previous_state_(t_fp8.state), previous_enabled_(t_fp8.enabled), enabled_(enabled) {
  t_fp8.state = &state;
  t_fp8.enabled = enabled;
  if (enabled && t_fp8.enabled_scopes++ == 0) t_fp8.next_site = 0;
}

Fp8Autocast::~Fp8Autocast() {
  t_fp8.state = previous_state_;
  t_fp8.enabled = previous_enabled_;
  if (enabled_) --t_fp8.enabled_scopes;
}

Fp8State* fp8_active() {
  if (!t_fp8.enabled || t_fp8.suspended > 0 || detail::autocast_suspended() > 0) return nullptr;
  return t_fp8.state;
}

size_t fp8_next_site() { return t_fp8.next_site++; }

}  // namespace mixp::amp
