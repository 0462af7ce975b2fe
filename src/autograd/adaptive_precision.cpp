// Precision that adapts per layer: the statistics of a quantization against bf16, the normal
// tensor's baselines, and the moves (mixp/amp/adaptive.h states the rules).
#include <algorithm>
#include <cmath>
#include <cstdio>

#include <nlohmann/json.hpp>

#include "kernels/fp4_quantize.h"
#include "mixp/amp/adaptive.h"
#include "mixp/amp/fp4.h"
#include "mixp/autograd.h"
#include "mixp/error.h"
#include "mixp/float_types.h"

namespace mixp::amp {
namespace {

// The decode scale of every element's block, the element format's largest magnitude and its
// smallest normal one: what tells a saturated or a subnormal element.
struct Grid {
  Tensor dequantized;
  std::vector<float> block_scale;  // per element
  float max_element = 0.0f, min_normal = 0.0f;
};

Grid fp4_grid(const Tensor& v, Fp8Role role, const Fp4Recipe& recipe) {
  const Fp4Tensor q = quantize_fp4(
      v, recipe.scaling,
      {.square_blocks = role == Fp8Role::weight && recipe.square_weights && v.ndim() == 2,
       .mx_rounding = recipe.mx_scale_rounding});
  Grid g{.dequantized = q.dequantize(), .block_scale = {}, .max_element = 6.0f, .min_normal = 1.0f};
  const int64_t block = q.block_size(), nb = q.block_scales.size(1);
  const uint8_t* codes = q.block_scales.data<uint8_t>();
  const float global = 1.0f / q.tensor_scale;
  g.block_scale.resize(size_t(q.rows * q.cols));
  for (int64_t r = 0; r < q.rows; ++r)
    for (int64_t c = 0; c < q.cols; ++c) {
      const uint8_t code = codes[r / q.block_rows * nb + c / block];
      g.block_scale[size_t(r * q.cols + c)] = q.scaling == Fp4Scaling::nvfp4
                                                  ? float(float8_e4m3::from_bits(code)) * global
                                                  : e8m0_value(code);
    }
  return g;
}

Grid fp8_grid(const Tensor& v) {
  const Fp8Tensor q = quantize(v, DType::e4m3, Fp8Scaling::mxfp8, 1.0f, MxScaleRounding::up);
  Grid g{.dequantized = q.dequantize(),
         .block_scale = {},
         .max_element = 448.0f,
         .min_normal = 0x1p-6f};
  const int64_t rows = v.size(0), cols = v.size(1), nb = q.block_scales.size(1);
  const uint8_t* codes = q.block_scales.data<uint8_t>();
  g.block_scale.resize(size_t(rows * cols));
  for (int64_t r = 0; r < rows; ++r)
    for (int64_t c = 0; c < cols; ++c)
      g.block_scale[size_t(r * cols + c)] = e8m0_value(codes[r * nb + c / q.block_cols]);
  return g;
}

// The product x W^T in fp32 from x and W rounded to bf16: the reference of a layer's GEMM.
Tensor bf16_product(const Tensor& x, const Tensor& w) {
  const Tensor a = x.to(DType::bf16), b = w.to(DType::bf16);
  Tensor c = empty({x.size(0), w.size(0)}, DType::f32, MemoryTag::workspace);
  kernels::bf16_product(a, b, c);
  return c;
}

double relative_rms(const Tensor& got, const Tensor& want) {
  const float* g = got.data<float>();
  const float* w = want.data<float>();
  double e = 0.0, s = 0.0;
  for (int64_t i = 0; i < want.numel(); ++i) {
    const double d = double(g[i]) - double(w[i]);
    e += d * d;
    s += double(w[i]) * double(w[i]);
  }
  return s > 0.0 ? std::sqrt(e / s) : 0.0;
}

// [rows, cols] -> [cols, rows], as f32.
Tensor transposed(const Tensor& t) {
  const Tensor f = t.to(DType::f32);
  const int64_t rows = t.size(0), cols = t.size(1);
  Tensor out = empty({cols, rows}, DType::f32, MemoryTag::workspace);
  const float* s = f.data<float>();
  float* o = out.data<float>();
  for (int64_t r = 0; r < rows; ++r)
    for (int64_t c = 0; c < cols; ++c) o[c * rows + r] = s[r * cols + c];
  return out;
}

}  // namespace

double gemm_error(const Tensor& x, const Tensor& w, LayerFormat format, const Fp4Recipe& fp4) {
  MIXP_CHECK(x.defined() && w.defined() && x.ndim() == 2 && w.ndim() == 2 && x.size(1) == w.size(1),
             "gemm_error: expected x [rows, k] and W [n, k]");
  NoGradGuard no_grad;
  if (format == LayerFormat::bf16) return 0.0;
  const Tensor reference = bf16_product(x, w);
  if (format == LayerFormat::fp4) {
    const Fp4Tensor qx = quantize_fp4(x, fp4.scaling, {.mx_rounding = fp4.mx_scale_rounding});
    const Fp4Tensor qw =
        quantize_fp4(w, fp4.scaling,
                     {.square_blocks = fp4.square_weights, .mx_rounding = fp4.mx_scale_rounding});
    return relative_rms(fp4_gemm(qx, qw), reference);
  }
  const Fp8Tensor qx = quantize(x, DType::e4m3, Fp8Scaling::mxfp8, 1.0f, MxScaleRounding::up);
  const Fp8Tensor qw = quantize(w, DType::e4m3, Fp8Scaling::mxfp8, 1.0f, MxScaleRounding::up);
  return relative_rms(fp8_gemm(qx, qw), reference);
}

LayerFormat parse_layer_format(std::string_view name) {
  for (LayerFormat f : {LayerFormat::fp4, LayerFormat::fp8, LayerFormat::bf16})
    if (name == name_of(f)) return f;
  MIXP_CHECK(false, "unknown layer format '", name, "'; the formats are fp4, fp8 and bf16");
  return LayerFormat::bf16;
}

const char* name_of(LayerFormat format) {
  switch (format) {
    case LayerFormat::fp4: return "fp4";
    case LayerFormat::fp8: return "fp8";
    case LayerFormat::bf16: break;
  }
  return "bf16";
}

QuantizationStats quantization_stats(const Tensor& values, LayerFormat format, Fp8Role role,
                                     const Fp4Recipe& fp4) {
  MIXP_CHECK(values.defined() && values.ndim() == 2 && values.numel() > 0 &&
                 (values.dtype() == DType::f32 || values.dtype() == DType::bf16),
             "quantization_stats: expected a non-empty 2-D f32 or bf16 tensor");
  NoGradGuard no_grad;
  const Tensor v = values.to(DType::bf16).to(DType::f32);  // the bf16 values, exactly in f32
  const float* b = v.data<float>();
  const int64_t n = v.numel();
  QuantizationStats s;
  for (int64_t i = 0; i < n; ++i) s.nonfinite = s.nonfinite || !std::isfinite(b[i]);
  if (format == LayerFormat::bf16 || s.nonfinite) return s;
  const Grid g = format == LayerFormat::fp4 ? fp4_grid(v, role, fp4) : fp8_grid(v);
  const float* q = g.dequantized.data<float>();
  int64_t nonzero = 0, flushed = 0, saturated = 0, subnormal = 0;
  for (int64_t i = 0; i < n; ++i) {
    if (b[i] == 0.0f) continue;
    ++nonzero;
    const float scale = g.block_scale[size_t(i)];
    flushed += q[i] == 0.0f;
    saturated += std::fabs(b[i]) > g.max_element * scale;
    subnormal += q[i] != 0.0f && std::fabs(q[i]) < g.min_normal * scale;
  }
  s.error = relative_rms(g.dequantized, v);
  if (nonzero > 0) {
    s.flushed = double(flushed) / double(nonzero);
    s.saturated = double(saturated) / double(nonzero);
    s.subnormal = double(subnormal) / double(nonzero);
  }
  return s;
}

AdaptivePrecision* adaptive_of(Fp8State& state) {
  return dynamic_cast<AdaptivePrecision*>(state.extension());
}

AdaptivePrecision::AdaptivePrecision(AdaptiveRecipe recipe, Fp4Recipe fp4,
                                     std::vector<std::string> layers, std::vector<bool> eligible)
    : recipe_(recipe),
      fp4_(fp4),
      layers_(std::move(layers)),
      eligible_(eligible.empty() ? std::vector<bool>(layers_.size(), true) : std::move(eligible)),
      formats_(layers_.size(), recipe.lowest),
      streaks_(layers_.size(), 0),
      measured_(layers_.size() * 2),
      fp8_layers_(std::make_unique<Fp8State>(Fp8Recipe{.scaling = Fp8Scaling::mxfp8,
                                                       .format = Fp8Format::e4m3,
                                                       .mx_scale_rounding = MxScaleRounding::up})) {
  MIXP_CHECK(recipe.lowest != LayerFormat::bf16, "adaptive precision starts in fp4 or fp8");
  MIXP_CHECK(eligible_.size() == layers_.size(), "adaptive precision: ", eligible_.size(),
             " eligibility flags for ", layers_.size(), " layers");
  for (size_t i = 0; i < layers_.size(); ++i)
    if (!eligible_[i]) formats_[i] = LayerFormat::bf16;
  MIXP_CHECK(recipe.interval >= 1, "adaptive precision: interval must be at least 1, got ",
             recipe.interval);
  MIXP_CHECK(recipe.down_ratio > 0.0 && recipe.down_ratio < recipe.up_ratio,
             "adaptive precision: down_ratio must be positive and below up_ratio, got ",
             recipe.down_ratio, " and ", recipe.up_ratio);
  MIXP_CHECK(recipe.patience >= 1, "adaptive precision: patience must be at least 1, got ",
             recipe.patience);
}

AdaptivePrecision::~AdaptivePrecision() = default;

void AdaptivePrecision::begin(int64_t step, int64_t micro_batch) {
  if (step != step_) {
    measure_step_ = step % recipe_.interval == 0;
    if (measure_step_) std::fill(measured_.begin(), measured_.end(), Measured{});
    step_ = step;
  }
  // Micro-batch 0 of the step (rank 0's first) measures; the others take its measurements.
  measuring_ = measure_step_ && micro_batch == 0;
}

AdaptivePrecision::Measured& AdaptivePrecision::measured(size_t layer, LayerFormat format) {
  MIXP_ASSERT(format != LayerFormat::bf16 && layer < layers_.size(), "no measurement slot");
  return measured_[layer * 2 + size_t(format)];
}

// A standard normal tensor, the same every time: what "well-behaved" means.
Tensor normal_tensor(uint64_t stream) {
  Philox rng(PhiloxState{.seed = 0x6e6f726d616cull, .stream = stream, .offset = 0});  // "normal"
  return randn({64, 256}, rng, 1.0, DType::f32);
}

const QuantizationStats& AdaptivePrecision::baseline(LayerFormat format, Fp8Role role) {
  const auto key = std::make_pair(int(format), int(role));
  if (auto it = baselines_.find(key); it != baselines_.end()) return it->second;
  return baselines_.emplace(key, quantization_stats(normal_tensor(0), format, role, fp4_))
      .first->second;
}

double AdaptivePrecision::baseline_gemm_error(LayerFormat format) {
  if (auto it = gemm_baselines_.find(int(format)); it != gemm_baselines_.end()) return it->second;
  const double e = gemm_error(normal_tensor(0), normal_tensor(1), format, fp4_);
  return gemm_baselines_.emplace(int(format), e).first->second;
}

void AdaptivePrecision::note_flushed(size_t layer, LayerFormat format, Fp8Role role,
                                     const Tensor& values) {
  const QuantizationStats s = quantization_stats(values, format, role, fp4_);
  Measured& m = measured(layer, format);
  m.seen = true;
  m.nonfinite = m.nonfinite || s.nonfinite;
  m.flush_excess = std::max(m.flush_excess, s.flushed - baseline(format, role).flushed);
}

void AdaptivePrecision::measure_inputs(size_t layer, const Tensor& x, const Tensor& w) {
  MIXP_CHECK(layer < layers_.size(), "adaptive precision: no layer ", layer);
  for (LayerFormat f : {LayerFormat::fp4, LayerFormat::fp8}) {
    if (f < recipe_.lowest) continue;
    note_flushed(layer, f, Fp8Role::input, x);
    note_flushed(layer, f, Fp8Role::weight, w);
    Measured& m = measured(layer, f);
    if (m.nonfinite) continue;
    const double base = baseline_gemm_error(f);
    m.badness = std::max(m.badness, base > 0.0 ? gemm_error(x, w, f, fp4_) / base : 0.0);
  }
}

void AdaptivePrecision::measure_gradient(size_t layer, const Tensor& dy, const Tensor& x) {
  MIXP_CHECK(layer < layers_.size(), "adaptive precision: no layer ", layer);
  const Tensor dyt = transposed(dy), xt = transposed(x);
  for (LayerFormat f : {LayerFormat::fp4, LayerFormat::fp8}) {
    if (f < recipe_.lowest) continue;
    note_flushed(layer, f, Fp8Role::gradient, dy);
    Measured& m = measured(layer, f);
    if (m.nonfinite) continue;
    const double base = baseline_gemm_error(f);
    m.badness = std::max(m.badness, base > 0.0 ? gemm_error(dyt, xt, f, fp4_) / base : 0.0);
  }
}

std::vector<double> AdaptivePrecision::measurements() const {
  std::vector<double> out;
  for (const Measured& m : measured_) {
    out.insert(out.end(), {m.badness, m.flush_excess, m.nonfinite ? 1.0 : 0.0, m.seen ? 1.0 : 0.0});
  }
  return out;
}

void AdaptivePrecision::set_measurements(const std::vector<double>& values) {
  MIXP_CHECK(values.size() == measured_.size() * 4, "adaptive precision: ", values.size(),
             " measurements for ", measured_.size() * 4);
  for (size_t i = 0; i < measured_.size(); ++i) {
    measured_[i] = {.badness = values[4 * i],
                    .flush_excess = values[4 * i + 1],
                    .nonfinite = values[4 * i + 2] != 0.0,
                    .seen = values[4 * i + 3] != 0.0};
  }
}

void AdaptivePrecision::decide(size_t layer) {
  if (!eligible_[layer]) return;
  const LayerFormat f = formats_[layer];
  auto move = [&](LayerFormat to, const char* statistic, double value) {
    decisions_.push_back({.step = step_ + 1,
                          .layer = layers_[layer],
                          .from = f,
                          .to = to,
                          .statistic = statistic,
                          .value = value});
    formats_[layer] = to;
    streaks_[layer] = 0;
  };
  if (f != LayerFormat::bf16) {
    const Measured& m = measured(layer, f);
    const LayerFormat up = LayerFormat(int(f) + 1);
    if (m.seen && m.nonfinite) return move(up, "nonfinite", 1.0);
    if (m.seen && m.badness > recipe_.up_ratio) return move(up, "error", m.badness);
    if (m.seen && m.flush_excess > recipe_.flush_margin) return move(up, "flushed", m.flush_excess);
  }
  if (f == recipe_.lowest) return;
  const LayerFormat below = LayerFormat(int(f) - 1);
  const Measured& m = measured(layer, below);
  if (!m.seen) return;
  const bool safe =
      !m.nonfinite && m.badness < recipe_.down_ratio && m.flush_excess < recipe_.flush_margin / 2.0;
  streaks_[layer] = safe ? streaks_[layer] + 1 : 0;
  if (streaks_[layer] >= recipe_.patience) move(below, "safe", double(streaks_[layer]));
}

void AdaptivePrecision::update() {
  if (measure_step_)
    for (size_t i = 0; i < layers_.size(); ++i) decide(i);
  measure_step_ = false;
  measuring_ = false;
  fp8_layers_->update();
}

void AdaptivePrecision::save(StateDict& state) const {
  nlohmann::json j;
  j["layers"] = layers_;
  for (size_t i = 0; i < layers_.size(); ++i) {
    j["formats"].push_back(name_of(formats_[i]));
    j["streaks"].push_back(streaks_[i]);
  }
  j["decisions"] = nlohmann::json::array();
  for (const PrecisionDecision& d : decisions_)
    j["decisions"].push_back({{"step", d.step},
                              {"layer", d.layer},
                              {"from", name_of(d.from)},
                              {"to", name_of(d.to)},
                              {"statistic", d.statistic},
                              {"value", d.value}});
  state.values["adaptive"] = j.dump();
}

void AdaptivePrecision::load(const StateDict& state) {
  const auto it = state.values.find("adaptive");
  MIXP_CHECK(it != state.values.end(),
             "adaptive precision: the checkpoint holds no per-layer formats (was it written "
             "under another preset?)");
  try {
    const nlohmann::json j = nlohmann::json::parse(it->second);
    MIXP_CHECK(j.at("layers").get<std::vector<std::string>>() == layers_,
               "adaptive precision: the checkpoint's layers are not this model's");
    std::vector<LayerFormat> formats;
    for (const auto& f : j.at("formats"))
      formats.push_back(parse_layer_format(f.get<std::string>()));
    std::vector<PrecisionDecision> decisions;
    for (const auto& d : j.at("decisions")) {
      decisions.push_back({.step = d.at("step").get<int64_t>(),
                           .layer = d.at("layer").get<std::string>(),
                           .from = parse_layer_format(d.at("from").get<std::string>()),
                           .to = parse_layer_format(d.at("to").get<std::string>()),
                           .statistic = d.at("statistic").get<std::string>(),
                           .value = d.at("value").get<double>()});
    }
    formats_ = std::move(formats);
    streaks_ = j.at("streaks").get<std::vector<int>>();
    decisions_ = std::move(decisions);
  } catch (const nlohmann::json::exception& e) {
    MIXP_CHECK(false,
               "adaptive precision: the checkpoint's per-layer state is not valid: ", e.what());
  }
}

}  // namespace mixp::amp
