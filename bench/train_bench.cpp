// A whole training step of a built-in model (mixp/nn/models.h) under a precision preset:
// forward in the preset's Autocast scope, the loss scaled by its GradScaler, backward, AdamW
// (the trainer's settings, with the preset's moments) and zero_grad, on synthetic batches of the
// model's input shape. One JSON line: median step time, samples/s, the model's GFLOP/s against the
// machine's peak for the preset's compute dtype, and peak memory by tag.
#include <sys/resource.h>

#include <algorithm>
#include <chrono>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "bench/bench.h"
#include "mixp/amp/presets.h"
#include "mixp/error.h"
#include "mixp/memory.h"
#include "mixp/nn/models.h"
#include "mixp/ops.h"
#include "mixp/optim/adamw.h"
#include "mixp/runtime.h"

namespace mixp::bench {
namespace {

using Clock = std::chrono::steady_clock;

double mib(int64_t bytes) { return double(bytes) / (1024.0 * 1024.0); }

// The trainer's optimizers: for language models nanoGPT's (decay 0.1 on matrices only).
std::vector<std::unique_ptr<optim::AdamW>> trainer_optimizers(const std::vector<Tensor>& params,
                                                              bool lm, const amp::Preset& preset) {
  std::vector<std::unique_ptr<optim::AdamW>> optimizers;
  if (lm) {
    std::vector<Tensor> decay, no_decay;
    for (const Tensor& p : params) (p.ndim() >= 2 ? decay : no_decay).push_back(p);
    optimizers.push_back(std::make_unique<optim::AdamW>(
        decay, optim::AdamWOptions{.betas = {0.9, 0.99},
                                   .weight_decay = 0.1,
                                   .precision = preset.optimizer_precision,
                                   .rounding = {1, 2, 0},
                                   .state_dtype = preset.optimizer_state_dtype}));
    optimizers.push_back(std::make_unique<optim::AdamW>(
        no_decay, optim::AdamWOptions{.betas = {0.9, 0.99},
                                      .weight_decay = 0.0,
                                      .precision = preset.optimizer_precision,
                                      .rounding = {1, 3, 0},
                                      .state_dtype = preset.optimizer_state_dtype}));
  } else {
    optimizers.push_back(std::make_unique<optim::AdamW>(
        params, optim::AdamWOptions{.precision = preset.optimizer_precision,
                                    .rounding = {1, 2, 0},
                                    .state_dtype = preset.optimizer_state_dtype}));
  }
  return optimizers;
}

// Peak memory in MiB by tag (and the total), what the total's peak is made of (summing to it),
// and the peak by dtype.
struct MemoryJson {
  nlohmann::ordered_json by_tag, at_peak, by_dtype;
};

MemoryJson memory_json() {
  const memory::Stats st = memory::stats();
  MemoryJson m;
  for (int t = 0; t < kMemoryTagCount; ++t)
    m.by_tag[name_of(MemoryTag(t))] = mib(st.peak(MemoryTag(t)));
  m.by_tag["total"] = mib(st.peak_total);
  for (int t = 0; t < kMemoryTagCount; ++t)
    m.at_peak[name_of(MemoryTag(t))] = mib(st.at_peak(MemoryTag(t)));
  for (int d = 0; d < kDTypeCount; ++d)
    if (st.peak(DType(d)) > 0) m.by_dtype[name_of(DType(d))] = mib(st.peak(DType(d)));
  return m;
}

}  // namespace

int64_t default_batch(const std::string& model) {
  // As `mixp train`: 64 images for the classifiers, 16 sequences for the language models.
  return model == "mlp" || model == "cnn" ? 64 : 16;
}

double train_step_flop(const nn::ModelConfig& c, int64_t batch) {
  // Multiply-adds count 2 FLOP. A layer's forward is 1x; its backward is 2x (the gradients of
  // its input and of its weights), except where the input is the data, whose gradient nobody
  // computes: 1x. Norms, activations, softmax, embeddings and the optimizer are not counted.
  const double n = double(batch);
  if (c.name == "mlp") {
    const double in = double(c.image_size * c.image_size), h = 1024, k = double(c.classes);
    const double first = 2 * n * in * h, rest = 2 * n * (h * h + h * k);
    return 2 * first + 3 * rest;
  }
  if (c.name == "cnn") {
    const double s = double(c.image_size), k = double(c.classes);
    const double conv1 = 2 * n * s * s * 32 * 1 * 9;               // 1 -> 32, 3x3, same size
    const double conv2 = 2 * n * (s / 2) * (s / 2) * 64 * 32 * 9;  // after the first pool
    const double fc = 2 * n * (64 * (s / 4) * (s / 4) * 128 + 128 * k);
    return 2 * conv1 + 3 * (conv2 + fc);
  }
  MIXP_CHECK(c.name == "gpt", "bench train: --model must be mlp, cnn or gpt, got '", c.name, "'");
  // Per layer: c_attn (C -> 3C), c_proj (C -> C), c_fc (C -> 4C), mlp.c_proj (4C -> C), and
  // attention's two batched products (Q K^T and P V, T x T x C each over the heads, counted
  // whole although causal, as nanoGPT's MFU estimate does); then lm_head (C -> V). Every input
  // here requires a gradient.
  const double t = double(c.context), w = double(c.width), v = double(c.vocab);
  const double per_layer = 2 * n * t * 12 * w * w + 4 * n * t * t * w;
  return 3 * (double(c.layers) * per_layer + 2 * n * t * w * v);
}

int run_train_bench(const TrainBenchOptions& o, std::FILE* out) {
  MIXP_CHECK(o.model == "mlp" || o.model == "cnn" || o.model == "gpt",
             "bench train: --model must be mlp, cnn or gpt, got '", o.model, "'");
  MIXP_CHECK(o.steps >= 1, "bench train: --steps must be at least 1, got ", o.steps);
  MIXP_CHECK(o.warmup >= 0, "bench train: --warmup must be at least 0, got ", o.warmup);
  MIXP_CHECK(o.batch >= 0, "bench train: --batch must be positive, got ", o.batch);
  MIXP_CHECK(o.peak_gflops >= 0, "bench train: --peak-gflops must be positive, got ",
             o.peak_gflops);
  const amp::Preset& preset = amp::preset(o.precision);
  const DType compute = preset.compute_dtype.value_or(preset.parameter_dtype);
  // fp16 products run widened to fp32 on CPUs without native fp16 (DESIGN.md), so fp32's peak.
  const bool bf16_peak = compute == DType::bf16;
  const double peak = o.peak_gflops > 0 ? o.peak_gflops : [&] {
    const PeakResult r = measure_peak({.reps = 3, .scale = 0.5});
    return bf16_peak ? r.bf16_peak() : r.f32_peak();
  }();

  nn::ModelConfig config;
  config.name = o.model;
  const int64_t batch = o.batch > 0 ? o.batch : default_batch(o.model);
  const bool lm = o.model == "gpt";
  std::unique_ptr<nn::Model> model = nn::make_model(config, 1337);

  // The parameters as the preset stores them, written back into the model (as the trainer).
  const auto named = model->named_parameters();
  std::vector<Tensor> values;
  for (const auto& [name, p] : named) values.push_back(*p);
  const std::vector<Tensor> params = preset.cast_parameters(values, model->norm_parameter_flags());
  for (size_t i = 0; i < named.size(); ++i) *named[i].second = params[i];
  values.clear();  // the fp32 originals of cast parameters must not outlive the cast
  int64_t parameter_count = 0;
  for (const Tensor& p : params) parameter_count += p.numel();

  std::vector<std::unique_ptr<optim::AdamW>> optimizers = trainer_optimizers(params, lm, preset);
  amp::GradScaler scaler = preset.make_scaler();

  // Synthetic batches: the shapes and dtypes of the real data, random values.
  Philox rng(PhiloxState{7, 0, 0});
  Tensor x, y;
  if (lm) {
    std::vector<double> tok(static_cast<size_t>(batch * config.context));
    for (double& v : tok) v = double(rng.next_u32() % uint32_t(config.vocab));
    x = from_values(tok, {batch, config.context}, DType::i64, MemoryTag::data);
    std::rotate(tok.begin(), tok.begin() + 1, tok.end());
    y = from_values(tok, {batch * config.context}, DType::i64, MemoryTag::data);
  } else {
    x = randn({batch, 1, config.image_size, config.image_size}, rng, 1.0, DType::f32,
              MemoryTag::data);
    std::vector<double> labels(static_cast<size_t>(batch));
    for (double& v : labels) v = double(rng.next_u32() % uint32_t(config.classes));
    y = from_values(labels, {batch}, DType::i64, MemoryTag::data);
  }

  memory::reset_peaks();
  std::vector<double> ms;
  double loss_value = 0;
  for (int s = 0; s < o.warmup + o.steps; ++s) {
    const auto start = Clock::now();
    Tensor loss;
    {
      auto scope = preset.autocast();
      const Tensor logits = model->forward(x);
      loss = ops::cross_entropy(lm ? logits.reshape({-1, config.vocab}) : logits, y);
    }
    scaler.scale(loss).backward();
    for (auto& opt : optimizers) scaler.step(*opt);
    scaler.update();
    for (auto& opt : optimizers) opt->zero_grad();
    loss_value = loss.item();
    const double elapsed = std::chrono::duration<double, std::milli>(Clock::now() - start).count();
    if (s >= o.warmup) ms.push_back(elapsed);
  }
  std::sort(ms.begin(), ms.end());
  const size_t k = ms.size();
  const double median_ms = k % 2 ? ms[k / 2] : 0.5 * (ms[k / 2 - 1] + ms[k / 2]);
  const double flop = train_step_flop(config, batch);
  const double gflops = flop / (median_ms * 1e6);

  const MemoryJson peaks = memory_json();
  rusage usage{};
  getrusage(RUSAGE_SELF, &usage);

  const nlohmann::ordered_json j = {
      {"framework", "mixp"},
      {"model", o.model},
      {"precision", o.precision},
      {"batch", batch},
      {"threads", num_threads()},
      {"parameters", parameter_count},
      {"steps", o.steps},
      {"warmup", o.warmup},
      {"median_ms", median_ms},
      {"min_ms", ms.front()},
      {"samples_per_s", double(batch) * 1000.0 / median_ms},
      {"gflop_per_step", flop / 1e9},
      {"gflops", gflops},
      {"peak_dtype", bf16_peak ? "bf16" : "f32"},
      {"peak_gflops", peak},
      {"pct_of_peak", 100.0 * gflops / peak},
      {"loss", loss_value},
      {"peak_memory_mib", peaks.by_tag},
      {"peak_memory_mib_by_dtype", peaks.by_dtype},
      {"memory_at_peak_mib", peaks.at_peak},
      {"max_rss_mib", double(usage.ru_maxrss) / 1024.0},
  };
  std::fprintf(out, "%s\n", j.dump().c_str());
  return 0;
}

}  // namespace mixp::bench
