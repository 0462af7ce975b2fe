// mixp inspect: brief training with a Collector, then an fp32 probe step, then the report.
#include "mixp/train/inspect.h"

#include <algorithm>
#include <cctype>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>

#include "mixp/amp/autocast.h"
#include "mixp/amp/grad_scaler.h"
#include "mixp/amp/presets.h"
#include "mixp/autograd.h"
#include "mixp/diag/svg.h"
#include "mixp/error.h"
#include "mixp/io/checkpoint.h"
#include "mixp/io/safetensors.h"
#include "mixp/train/trained_model.h"
#include "train/inspect_block_scales.h"

namespace mixp::train {
namespace {

using diag::Role;
using diag::TensorStats;
using nlohmann::json;

// Every record of `layer` (a layer's own, or with parameters "layer.*") in `role`, merged.
TensorStats merged(const std::vector<diag::LayerRecord>& records, const std::string& layer,
                   Role role, int64_t step, const std::vector<diag::FormatQuery>& queries) {
  TensorStats out;
  bool any = false;
  const bool parameter_role = role == Role::weight || role == Role::weight_gradient;
  for (const diag::LayerRecord& r : records) {
    if (r.role != role || r.step != step) continue;
    const bool mine = parameter_role ? r.name.rfind(layer.empty() ? "" : layer + ".", 0) == 0 &&
                                           r.name.find('.', layer.empty() ? 0 : layer.size() + 1) ==
                                               std::string::npos
                                     : r.name == layer;
    if (!mine) continue;
    if (!any) {
      out = r.stats;
      any = true;
    } else {
      out.merge(r.stats);
    }
  }
  // A layer the loss does not reach has no gradient records: empty statistics.
  if (!any) out = diag::value_stats({}, queries);
  return out;
}

std::optional<int> min_exponent(std::optional<int> a, std::optional<int> b) {
  if (!a) return b;
  if (!b) return a;
  return std::min(*a, *b);
}

void fill_numbers(LayerInspection& l, double loss_scale, double keep) {
  const Format fp16 = Format::fp16();
  l.underflow_unscaled = diag::underflow_fraction_at(l.activation_gradients, fp16, 1.0);
  l.underflow_at_scale = diag::underflow_fraction_at(l.activation_gradients, fp16, loss_scale);
  const TensorStats& g = l.activation_gradients;
  l.predicted_zero_fraction =
      g.count > 0
          ? (double(g.zeros) + l.underflow_at_scale * double(g.nonzero_finite())) / double(g.count)
          : 0.0;
  l.smallest_safe_exponent = diag::smallest_safe_scale_exponent(l.activation_gradients, fp16, keep);
  l.largest_safe_exponent =
      min_exponent(diag::largest_safe_scale_exponent(l.activation_gradients.max_abs, fp16),
                   diag::largest_safe_scale_exponent(l.weight_gradients.max_abs, fp16));
}

// The zeros of the activation gradients at the observation step (the last records).
void fill_observed(LayerInspection& l, const std::vector<diag::LayerRecord>& records,
                   bool whole_model) {
  int64_t last = -1;
  for (const diag::LayerRecord& r : records)
    if (r.role == Role::activation_gradient) last = std::max(last, r.step);
  int64_t zeros = 0, count = 0;
  for (const diag::LayerRecord& r : records) {
    if (r.role != Role::activation_gradient || r.step != last) continue;
    if (!whole_model && r.name != l.layer) continue;
    zeros += r.stats.zeros;
    count += r.stats.count;
    l.observed_loss_scale = r.loss_scale;
  }
  l.observed_zero_fraction = count > 0 ? double(zeros) / double(count) : 0.0;
}

diag::Log2Histogram histogram_of(const TensorStats& s, const std::string& title,
                                 double loss_scale) {
  diag::Log2Histogram h;
  h.title = title;
  h.loss_scale = loss_scale;
  h.zero_fraction = s.count > 0 ? double(s.zeros) / double(s.count) : 0.0;
  const double n = double(s.nonzero_finite());
  for (int i = 0; i < diag::kWideBinades; ++i) {
    if (s.wide[size_t(i)] == 0) continue;
    h.exponents.push_back(diag::kWideMinExponent + i);
    h.fractions.push_back(double(s.wide[size_t(i)]) / n);
  }
  return h;
}

json optional_exponent(const std::optional<int>& k) {
  if (!k) return nullptr;
  return {{"exponent", *k}, {"scale", std::ldexp(1.0, *k)}};
}

json stats_json(const TensorStats& s) {
  json formats = json::array();
  for (const diag::FormatCounts& c : s.formats)
    formats.push_back({{"format", c.query.label},
                       {"scale", c.query.scale},
                       {"underflow", c.underflow_fraction()},
                       {"subnormal", c.subnormal_fraction()},
                       {"overflow", c.overflow_fraction()}});
  json exponents = json::array(), counts = json::array();
  for (int i = 0; i < diag::kWideBinades; ++i) {
    if (s.wide[size_t(i)] == 0) continue;
    exponents.push_back(diag::kWideMinExponent + i);
    counts.push_back(s.wide[size_t(i)]);
  }
  return {{"count", s.count},
          {"zeros", s.zeros},
          {"non_finite", s.non_finite},
          {"min_abs", s.min_abs},
          {"max_abs", s.max_abs},
          {"formats", formats},
          {"log2_histogram", {{"exponents", exponents}, {"counts", counts}}}};
}

json layer_json(const LayerInspection& l) {
  return {{"layer", l.layer},
          {"fp16_underflow_unscaled", l.underflow_unscaled},
          {"fp16_underflow_at_loss_scale", l.underflow_at_scale},
          {"smallest_safe_loss_scale", optional_exponent(l.smallest_safe_exponent)},
          {"largest_safe_loss_scale", optional_exponent(l.largest_safe_exponent)},
          {"predicted_zero_fraction", l.predicted_zero_fraction},
          {"observed_zero_fraction", l.observed_zero_fraction},
          {"observed_loss_scale", l.observed_loss_scale},
          {"activation_gradients", stats_json(l.activation_gradients)},
          {"activations", stats_json(l.activations)},
          {"weights", stats_json(l.weights)},
          {"weight_gradients", stats_json(l.weight_gradients)}};
}

std::string scale_text(const std::optional<int>& k) {
  if (!k) return "-";
  return "2^" + std::to_string(*k);
}

std::string percent(double f) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.2f%%", 100 * f);
  return buf;
}

std::string file_name_of(const std::string& layer) {
  std::string s = layer.empty() ? "model" : layer;
  for (char& c : s)
    if (!(std::isalnum(static_cast<unsigned char>(c)) || c == '.' || c == '-' || c == '_')) c = '_';
  return s;
}

// The probe: the same weights in fp32, the same batch, fp32 forward and backward, unscaled.
std::vector<diag::LayerRecord> probe_in_fp32(TrainModel& model, nn::Module& module,
                                             const data::Batch& batch,
                                             const diag::CollectorOptions& collect) {
  std::vector<Tensor> originals, probe_values;
  for (const auto& [name, p] : module.named_parameters()) {
    originals.push_back(*p);
    probe_values.push_back(
        (p->dtype() == DType::f32 ? p->clone(MemoryTag::parameter) : p->detach().to(DType::f32))
            .detach()
            .set_requires_grad(true));
  }
  nn::replace_parameters(module, probe_values);
  std::vector<diag::LayerRecord> probe_records;
  try {
    diag::Collector probe(module, collect);
    probe.begin_step(0, 1.0);
    task_loss(model.forward(batch.x), batch.y, model.task()).backward();
    probe.end_step();
    probe_records = probe.records();
  } catch (...) {
    nn::replace_parameters(module, originals);
    throw;
  }
  nn::replace_parameters(module, originals);
  return probe_records;
}

// Each layer's numbers from the probe and the observed steps, and the whole model's.
void summarize_layers(InspectResult& result, const std::vector<std::string>& layers,
                      const std::vector<diag::LayerRecord>& probe_records,
                      const std::vector<diag::FormatQuery>& queries,
                      const InspectOptions& options) {
  LayerInspection all;
  all.layer = "all";
  bool first = true;
  std::vector<diag::LayerNumerics> numerics;
  for (const std::string& layer : layers) {
    LayerInspection l;
    l.layer = layer;
    l.activations = merged(probe_records, layer, Role::activation, 0, queries);
    l.activation_gradients = merged(probe_records, layer, Role::activation_gradient, 0, queries);
    l.weights = merged(probe_records, layer, Role::weight, 0, queries);
    l.weight_gradients = merged(probe_records, layer, Role::weight_gradient, 0, queries);
    fill_numbers(l, result.loss_scale, options.keep);
    fill_observed(l, result.records, false);
    numerics.push_back({.layer = l.layer,
                        .activations = l.activations,
                        .activation_gradients = l.activation_gradients,
                        .weights = l.weights});
    if (first) {
      all.activations = l.activations;
      all.activation_gradients = l.activation_gradients;
      all.weights = l.weights;
      all.weight_gradients = l.weight_gradients;
      first = false;
    } else {
      all.activations.merge(l.activations);
      all.activation_gradients.merge(l.activation_gradients);
      all.weights.merge(l.weights);
      all.weight_gradients.merge(l.weight_gradients);
    }
    result.layers.push_back(std::move(l));
  }
  fill_numbers(all, result.loss_scale, options.keep);
  fill_observed(all, result.records, true);
  result.model = std::move(all);
  result.advice = diag::advise(numerics, result.loss_scale, options.advisor);
}

void write_inspect_files(const InspectResult& result, const std::string& out_dir) {
  std::filesystem::create_directories(out_dir + "/layers");
  io::write_file_atomically(out_dir + "/inspect.json", inspect_json(result));
  if (!result.block_scales.empty())
    io::write_file_atomically(out_dir + "/block_scales.csv", block_scales_csv(result.block_scales));
  const std::string what = result.train.model_name + " (" + result.train.precision + ")";
  diag::write_log2_histogram(
      out_dir + "/activation_gradients.svg",
      histogram_of(result.model.activation_gradients,
                   "activation gradients of every layer: " + what, result.loss_scale));
  for (const LayerInspection& l : result.layers)
    diag::write_log2_histogram(
        out_dir + "/layers/" + file_name_of(l.layer) + ".svg",
        histogram_of(l.activation_gradients, "activation gradients of " + l.layer + ": " + what,
                     result.loss_scale));
}

// The trained run's configuration, under the preset and for the steps asked.
RunConfig trained_run_config(const TrainedModel& trained, const TrainOptions& asked) {
  RunConfig run = trained.config;
  if (!asked.precision.empty()) run.train.precision = asked.precision;
  run.train.steps = asked.steps;
  run.train.threads = asked.threads;
  run.train.config.clear();  // the configuration of this inspection, not the run's
  return run;
}

// The trained weights, copied into the fresh model of the same configuration.
void load_trained_weights(TrainModel& model, const TrainedModel& trained) {
  auto* target = dynamic_cast<nn::Model*>(model.module());
  MIXP_ASSERT(target != nullptr, "a built-in model is not an nn::Model");
  std::map<std::string, Tensor> tensors;
  for (const auto& [name, p] : trained.model->named_parameters()) tensors.emplace(name, *p);
  for (const auto& [name, b] : trained.model->named_buffers()) tensors.emplace(name, *b);
  load_weights(*target, tensors, trained.source);
}

// The loss scale the trained run ended with, when it ran under `preset`: summary.json's beside
// its model.safetensors, or the checkpoint's scaler state. Nothing otherwise.
std::optional<double> trained_loss_scale(const TrainedModel& trained, const amp::Preset& preset) {
  if (trained.config.train.precision != preset.name) return std::nullopt;
  const std::filesystem::path source(trained.source);
  if (source.filename() == "model.safetensors") {
    std::ifstream in(source.parent_path() / "summary.json");
    const json summary = json::parse(in, nullptr, /*allow_exceptions=*/false);
    if (summary.is_object() && summary.contains("final_loss_scale") &&
        summary["final_loss_scale"].is_number())
      return summary["final_loss_scale"].get<double>();
    return std::nullopt;
  }
  const io::Checkpoint c = io::read_checkpoint(trained.source);
  if (c.state.has_value("scaler/scale")) return c.state.get_real("scaler/scale");
  return std::nullopt;
}

}  // namespace

InspectResult run_inspect(const InspectOptions& options) {
  MIXP_CHECK(options.every >= 1, "inspect: every must be at least 1, got ", options.every);
  MIXP_CHECK(options.keep > 0 && options.keep <= 1, "inspect: keep must be in (0, 1], got ",
             options.keep);
  MIXP_CHECK(options.run.train.steps >= 0, "inspect: steps must be >= 0, got ",
             options.run.train.steps);
  std::optional<TrainedModel> trained;
  if (!options.from.empty()) trained = load_trained_model(options.from);
  RunConfig run = trained ? trained_run_config(*trained, options.run.train) : options.run;
  if (trained && options.mx_scale_rounding)
    run.train.mx_scale_rounding = *options.mx_scale_rounding;
  run.train.out_dir.clear();
  run.train.checkpoint_every = 0;
  run.train.resume = false;
  const bool training = run.train.steps > 0;
  if (!training) run.train.steps = 1;  // prepare_run wants a run; none is trained
  const amp::Preset preset =
      amp::preset(run.train.precision, run.train.mx_scale_rounding, run.train.fp4_without);
  const std::vector<amp::Preset> block_presets =
      block_scale_presets(options.block_formats, run.train);
  PreparedRun prepared = prepare_run(run);
  TrainModel& model = *prepared.inputs.model;
  DataSource& data = *prepared.inputs.data;
  nn::Module* module = model.module();
  MIXP_CHECK(module != nullptr, "inspect: the model has no modules to hook");
  if (trained) load_trained_weights(model, *trained);

  diag::CollectorOptions collect{.every = 1};
  for (const Format& f : options.extra_formats)
    collect.queries.push_back({.format = f, .scale = 1.0, .label = f.name()});
  diag::CollectorOptions every = collect;
  every.every = options.every;

  InspectResult result;
  result.train.model_name = prepared.options.model_name;
  result.train.precision = preset.name;
  result.train.task = model.task();
  if (trained) {
    result.source = trained->source;
    result.source_step = trained->step;
  }
  if (training) {
    diag::Collector collector(*module, every);
    prepared.options.hooks.before_forward = [&](int64_t step, double scale) {
      collector.begin_step(step, scale);
    };
    prepared.options.hooks.after_backward = [&](int64_t, double) { collector.end_step(); };
    result.train = train(model, data, prepared.options);
    result.records = collector.records();
    result.loss_scale = result.train.final_loss_scale;
  } else {
    // At initialization: the parameters as the preset stores them, as train() would begin.
    std::vector<Tensor> values;
    for (const auto& [name, p] : model.named_parameters()) values.push_back(*p);
    nn::replace_parameters(*module, preset.cast_parameters(values, model.norm_parameter_flags()));
    const std::optional<double> trained_scale =
        trained ? trained_loss_scale(*trained, preset) : std::nullopt;
    result.loss_scale = trained_scale.value_or(preset.make_scaler().get_scale());
  }

  std::optional<data::Batch> batch = data.next_train();
  if (!batch) batch = data.next_train();  // the epoch had just ended
  MIXP_CHECK(batch.has_value(), "inspect: the training data yielded no batch to inspect");
  const int64_t step = result.train.steps;
  std::vector<std::string> layers;

  // The observation step: the preset's forward and backward at the loss scale, no update.
  {
    diag::Collector observe(*module, collect);
    layers = observe.layers();
    std::optional<LinearTensorCapture> linear_tensors;
    if (!block_presets.empty()) linear_tensors.emplace(*module, result.loss_scale);
    amp::GradScaler scaler(
        {.init_scale = result.loss_scale, .enabled = preset.make_scaler().is_enabled()});
    observe.begin_step(step, result.loss_scale);
    Tensor loss;
    {
      amp::Autocast scope = preset.autocast();
      loss = task_loss(model.forward(batch->x), batch->y, model.task());
    }
    scaler.scale(loss).backward();
    observe.end_step();
    if (linear_tensors)
      result.block_scales =
          inspect_block_scales(*linear_tensors, *module, block_presets, run.train.seed, step);
    result.loss = loss.item();
    for (auto& [name, p] : model.named_parameters()) p->set_grad(Tensor());
    for (const diag::LayerRecord& r : observe.records()) result.records.push_back(r);
  }

  const std::vector<diag::LayerRecord> probe_records =
      probe_in_fp32(model, *module, *batch, collect);
  summarize_layers(result, layers, probe_records, collect.queries, options);
  if (!options.out_dir.empty()) write_inspect_files(result, options.out_dir);
  return result;
}

namespace {

// Under auto-fp8 or auto-fp4: each Linear layer's format after the inspected training steps,
// the moves that led there, and the share of the FLOPs each format ran.
std::string adaptive_precision_text(const TrainResult& t) {
  if (t.layer_formats.empty()) return "";
  std::string out = "adaptive precision after " + std::to_string(t.steps) + " steps:\n";
  for (const auto& [layer, format] : t.layer_formats) out += "  " + layer + ": " + format + "\n";
  char buf[160];
  for (const amp::PrecisionDecision& d : t.precision_decisions) {
    std::snprintf(buf, sizeof buf, "  step %lld: %s %s -> %s (%s %.3g)\n", (long long)d.step,
                  d.layer.c_str(), amp::name_of(d.from), amp::name_of(d.to), d.statistic.c_str(),
                  d.value);
    out += buf;
  }
  std::string shares;
  for (const auto& [format, share] : t.linear_flop_shares) {
    std::snprintf(buf, sizeof buf, "%s%s %.1f%%", shares.empty() ? "" : ", ", format.c_str(),
                  100.0 * share);
    shares += buf;
  }
  return out + "  Linear FLOPs: " + shares + "\n";
}

}  // namespace

std::string inspect_table(const InspectResult& r) {
  int k = 0;
  std::frexp(r.loss_scale, &k);
  std::string out;
  char buf[512];
  std::snprintf(buf, sizeof buf,
                "%s under %s: %lld training steps, loss %.4g, loss scale %g (2^%d), %lld skipped\n"
                "activation gradients of an fp32 probe step, unscaled, against fp16:\n",
                r.train.model_name.c_str(), r.train.precision.c_str(), (long long)r.train.steps,
                r.loss, r.loss_scale, k - 1, (long long)r.train.skipped_steps);
  if (!r.source.empty())
    out += "trained weights from " + r.source +
           (r.source_step > 0 ? " (step " + std::to_string(r.source_step) + ")\n" : "\n");
  out += buf;
  size_t width = 5;
  for (const LayerInspection& l : r.layers) width = std::max(width, l.layer.size());
  const std::string at = "@2^" + std::to_string(k - 1);
  std::snprintf(buf, sizeof buf, "%-*s %9s %10s %10s %11s %11s %11s %11s %12s %12s\n", int(width),
                "layer", "values", "min |g|", "max |g|", "zero @1", ("zero " + at).c_str(),
                "keep 99.9%", "no overflow", "zeros pred.", "zeros seen");
  out += buf;
  auto row = [&](const LayerInspection& l) {
    const TensorStats& g = l.activation_gradients;
    std::snprintf(buf, sizeof buf, "%-*s %9lld %10.3g %10.3g %11s %11s %11s %11s %12s %12s\n",
                  int(width), l.layer.c_str(), (long long)g.count, g.min_abs, g.max_abs,
                  percent(l.underflow_unscaled).c_str(), percent(l.underflow_at_scale).c_str(),
                  ("from " + scale_text(l.smallest_safe_exponent)).c_str(),
                  ("to " + scale_text(l.largest_safe_exponent)).c_str(),
                  percent(l.predicted_zero_fraction).c_str(),
                  percent(l.observed_zero_fraction).c_str());
    out += buf;
  };
  for (const LayerInspection& l : r.layers) row(l);
  row(r.model);
  std::snprintf(buf, sizeof buf,
                "(zero: the fraction fp16 flushes to zero at that loss scale; keep 99.9%%: the "
                "smallest power-of-two scale\n that keeps 99.9%% from flushing; no overflow: the "
                "largest at which neither activation nor weight\n gradients overflow; zeros pred.: "
                "the probe's exact zeros and what fp16 flushes at the scale; zeros seen:\n what "
                "%s computed from the same weights and batch at that scale)\n",
                r.train.precision.c_str());
  out += buf;
  if (r.advice.empty()) {
    out += "advisor: no layer needs higher precision at this loss scale\n";
  } else {
    out += "advisor: keep in higher precision:\n";
    for (const diag::Advice& a : r.advice) out += "  " + a.layer + ": " + a.reason + "\n";
  }
  out += block_scales_table(r.block_scales);
  out += adaptive_precision_text(r.train);
  return out;
}

std::string inspect_json(const InspectResult& r) {
  json layers = json::array();
  for (const LayerInspection& l : r.layers) layers.push_back(layer_json(l));
  json advice = json::array();
  for (const diag::Advice& a : r.advice)
    advice.push_back(
        {{"layer", a.layer}, {"rule", a.rule}, {"fraction", a.fraction}, {"reason", a.reason}});
  json records = json::array();
  for (const diag::LayerRecord& rec : r.records) {
    double fp16_zero = 0.0;
    for (const diag::FormatCounts& c : rec.stats.formats)
      if (c.query.label == "fp16") fp16_zero = c.underflow_fraction();
    records.push_back({{"step", rec.step},
                       {"name", rec.name},
                       {"role", diag::name_of(rec.role)},
                       {"loss_scale", rec.loss_scale},
                       {"numel", rec.numel},
                       {"sampled", rec.stats.count},
                       {"zeros", rec.stats.zeros},
                       {"non_finite", rec.stats.non_finite},
                       {"min_abs", rec.stats.min_abs},
                       {"max_abs", rec.stats.max_abs},
                       {"fp16_underflow_unscaled", fp16_zero}});
  }
  json j = {{"model", r.train.model_name},
            {"precision", r.train.precision},
            {"steps", r.train.steps},
            {"loss", r.loss},
            {"skipped_steps", r.train.skipped_steps},
            {"loss_scale", r.loss_scale},
            {"layers", layers},
            {"all", layer_json(r.model)},
            {"advice", advice},
            {"training_records", records}};
  if (!r.source.empty()) {
    j["source"] = r.source;
    j["source_step"] = r.source_step;
  }
  if (!r.block_scales.empty()) j["block_scales"] = block_scales_json(r.block_scales);
  return j.dump(2) + "\n";
}

}  // namespace mixp::train
