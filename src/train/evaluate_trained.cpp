// `mixp eval`: a trained model on a whole evaluation split, under one or more presets, through
// the trainer's own evaluate().
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <functional>
#include <memory>
#include <sstream>

#include <nlohmann/json.hpp>
#include "mixp/autograd.h"
#include "mixp/error.h"
#include "mixp/io/checkpoint.h"
#include "mixp/runtime.h"
#include "mixp/train/evaluate.h"
#include "mixp/train/trained_model.h"
#include "train/builtin_model.h"
#include "train/low_precision_state.h"
#include "train/run_data.h"
#include "train/trainer_impl.h"

namespace mixp::train {
namespace {

using Visit = std::function<void(const data::Batch&)>;

// What a trained model is evaluated on: its batches, in the order the trainer evaluates them.
struct EvalData {
  std::function<void(const Visit&)> batches;
  std::string description;
  int64_t predictions = 0;
};

// A data source that only evaluates: what evaluate() reads.
class EvalSource : public DataSource {
 public:
  explicit EvalSource(const EvalData& data) : data_(data) {}
  std::optional<data::Batch> next_train() override { return std::nullopt; }
  int64_t batches_per_epoch() const override { return 0; }
  void for_each_eval_batch(const Visit& visit) override { data_.batches(visit); }

 private:
  const EvalData& data_;
};

std::string absolute(const std::string& path) {
  return std::filesystem::absolute(path).lexically_normal().string();
}

std::string own_data_path(const RunConfig& config) {
  const std::string path = config.data.empty() ? default_data_path(config.model.name) : config.data;
  return absolute(path);
}

constexpr const char* kOtherData = "Evaluate on other data with --data";

EvalData text_data(const TrainedModel& t, const EvalRequest& request, int64_t batch) {
  const int64_t context = t.config.model.context;
  Tensor tokens;
  EvalData d;
  if (!request.data.empty()) {
    tokens = data::tokenize_text(request.data, t.vocabulary);
    d.description = "all of " + absolute(request.data);
  } else {
    const std::string path = own_data_path(t.config);
    MIXP_CHECK(std::filesystem::is_regular_file(path), "the run's text ", path, " is not there. ",
               kOtherData, " FILE");
    const data::CharText text =
        data::load_char_text(path, {.validation_fraction = t.config.val_fraction});
    DataFingerprint found = fingerprint_of_tokens(path, text.train_tokens);
    found.vocabulary = text.vocabulary;
    if (t.config.fingerprint) check_fingerprint(*t.config.fingerprint, found, kOtherData);
    tokens = text.validation_tokens;
    d.description = "the validation split of " + path;
  }
  MIXP_CHECK(tokens.numel() >= 2, d.description, " holds ", tokens.numel(),
             " characters; at least 2 are needed to predict one");
  d.predictions = tokens.numel() - 1;
  d.batches = [tokens, context, batch](const Visit& visit) {
    data::for_each_text_window(tokens, context, batch, visit);
  };
  return d;
}

EvalData image_data(const TrainedModel& t, const EvalRequest& request, int64_t batch) {
  const std::string dir = request.data.empty() ? own_data_path(t.config) : absolute(request.data);
  MIXP_CHECK(std::filesystem::is_directory(dir), "no IDX data set at ", dir,
             request.data.empty() ? std::string(". ") + kOtherData + " DIR"
                                  : ": --data must be a folder of IDX files");
  auto set = std::make_shared<const data::ImageClassification>(
      data::load_idx_classification(dir, t.config.model.classes));
  if (request.data.empty() && t.config.fingerprint)
    check_fingerprint(*t.config.fingerprint,
                      fingerprint_of(dir, {set->train.images, set->train.labels}), kOtherData);
  const int64_t size = set->test.images.size(2);
  MIXP_CHECK(size == t.config.model.image_size && set->test.images.size(3) == size, dir,
             ": the test images are ", set->test.images.size(2), "x", set->test.images.size(3),
             "; the model reads ", t.config.model.image_size, "x", t.config.model.image_size);
  EvalData d;
  d.description = "the test set of " + dir;
  d.predictions = set->test.labels.numel();
  d.batches = [set, batch](const Visit& visit) {
    for_each_image_eval_batch(set->test, batch, visit);
  };
  return d;
}

EvalData regression_data(const TrainedModel& t, const EvalRequest& request) {
  MIXP_CHECK(request.data.empty(), "model ", t.config.model.name,
             " evaluates on synthetic data made from its seed; it takes no --data");
  auto set = std::make_shared<const data::Regression>(
      data::make_tiny_gradient_regression(t.config.train.seed));
  EvalData d;
  d.description = "the synthetic test set of seed " + std::to_string(t.config.train.seed);
  d.predictions = set->test_x.size(0);
  d.batches = [set](const Visit& visit) { visit({.x = set->test_x, .y = set->test_y}); };
  return d;
}

// Delayed scaling has no amax history in a model file: one forward pass of the first batch
// sets the scales that the evaluation then uses.
void calibrate(BuiltinModel& model, const EvalData& d, const amp::Preset& preset,
               amp::Fp8State& fp8) {
  std::optional<data::Batch> first;
  d.batches([&](const data::Batch& b) {
    if (!first) first = b;
  });
  model.set_training(false);
  {
    NoGradGuard no_grad;
    auto scope = preset.autocast();
    amp::Fp8Autocast fp8_scope(fp8);
    (void)model.forward(first->x);
  }
  fp8.update();
}

EvalRow evaluate_under(const TrainedWeights& weights, const std::string& precision,
                       const EvalData& d, std::optional<amp::MxScaleRounding> mx_rounding) {
  EvalRow row{.precision = precision, .metrics = std::nullopt, .error = {}};
  try {
    TrainedModel t = build_trained_model(weights);  // each preset casts its own copy
    const amp::MxScaleRounding rounding = mx_rounding.value_or(t.config.train.mx_scale_rounding);
    // The run's FP4 ablation belongs to its own preset; another preset is evaluated whole.
    const amp::Fp4Ablation without =
        precision == t.config.train.precision ? t.config.train.fp4_without : amp::Fp4Ablation{};
    Inference inference(*t.model, precision, rounding, without);
    inference.cast_parameters();
    BuiltinModel model(std::move(t.model));
    EvalSource source(d);
    const amp::Preset preset = amp::preset(precision, rounding, without);
    const std::unique_ptr<amp::Fp8State> fp8 =
        make_low_precision_state(preset, model.module(), t.config.train.seed);
    std::optional<StateDict> saved;
    if (fp8 && precision == t.config.train.precision &&
        rounding == t.config.train.mx_scale_rounding)
      saved = saved_precision_state(t);
    if (saved)
      fp8->load_state_dict(*saved);
    else if (fp8)
      calibrate(model, d, preset, *fp8);
    row.metrics = evaluate(model, source, preset, fp8.get(), t.step);
  } catch (const Error& e) {
    row.error = e.is_internal() ? e.what() : e.message();
  }
  return row;
}

}  // namespace

EvalReport evaluate_trained(const std::string& path, const EvalRequest& request) {
  const TrainedWeights weights = read_trained_weights(path);  // read once for every preset
  const TrainedModel t = build_trained_model(weights);
  std::vector<std::string> precisions = request.precisions;
  if (precisions.empty()) precisions.push_back(t.config.train.precision);
  for (const std::string& name : precisions) (void)amp::preset(name);  // unknown: refused now
  MIXP_CHECK(request.batch >= 0, "the batch size must be positive, got ", request.batch);
  const int64_t run_batch = t.config.batch > 0 ? t.config.batch : 0;
  const nn::Task task = task_of(t.config.model.name);
  const int64_t batch = request.batch > 0                  ? request.batch
                        : run_batch > 0                    ? run_batch
                        : task == nn::Task::classification ? 64
                                                           : 16;
  const int threads = request.threads > 0 ? request.threads : t.config.train.threads;
  if (threads > 0) set_num_threads(threads);
  const EvalData d = task == nn::Task::language_model   ? text_data(t, request, batch)
                     : task == nn::Task::classification ? image_data(t, request, batch)
                                                        : regression_data(t, request);
  EvalReport report{.model = t.config.model.name,
                    .source = t.source,
                    .step = t.step,
                    .trained_precision = t.config.train.precision,
                    .data = d.description,
                    .predictions = d.predictions,
                    .rows = {}};
  for (const std::string& precision : precisions)
    report.rows.push_back(evaluate_under(weights, precision, d, request.mx_scale_rounding));
  return report;
}

namespace {

std::string fixed(double v, int digits) {
  char text[64];
  std::snprintf(text, sizeof text, "%.*f", digits, v);
  return text;
}

}  // namespace

std::string eval_table(const EvalReport& r) {
  std::ostringstream out;
  out << r.model << " from " << r.source;
  if (r.step > 0)
    out << " (step " << r.step << ", trained under " << r.trained_precision << ")";
  else
    out << " (trained under " << r.trained_precision << ")";
  out << "\n"
      << r.data << ": " << r.predictions
      << (r.model == "gpt" || r.model == "lstm" ? " characters predicted"
          : r.model == "deep-mlp"               ? " samples"
                                                : " images")
      << "\n\n";
  const EvalRow* reference = nullptr;
  for (const EvalRow& row : r.rows)
    if (row.metrics && !reference) reference = &row;
  char line[256];
  const std::string vs = reference ? "vs " + reference->precision : "";
  std::snprintf(line, sizeof line, "%-18s %10s %10s %15s\n", "precision", "loss",
                r.model == "gpt" || r.model == "lstm" ? "bits/char"
                : r.model == "deep-mlp"               ? ""
                                                      : "accuracy",
                vs.c_str());
  out << line;
  for (const EvalRow& row : r.rows) {
    if (!row.metrics) {
      out << row.precision
          << std::string(row.precision.size() < 18 ? 19 - row.precision.size() : 1, ' ')
          << "failed: " << row.error << "\n";
      continue;
    }
    const EvalMetrics& m = *row.metrics;
    const std::string second = m.bits_per_char ? fixed(*m.bits_per_char, 5)
                               : m.accuracy    ? fixed(100 * *m.accuracy, 2) + "%"
                                               : "";
    const double change = 100.0 * (m.loss / reference->metrics->loss - 1.0);
    std::snprintf(line, sizeof line, "%-18s %10s %10s %+13.4f%%\n", row.precision.c_str(),
                  fixed(m.loss, 5).c_str(), second.c_str(), change);
    out << line;
  }
  return out.str();
}

std::string eval_json(const EvalReport& r) {
  nlohmann::json rows = nlohmann::json::array();
  for (const EvalRow& row : r.rows) {
    nlohmann::json j = {{"precision", row.precision}};
    if (row.metrics) {
      j["loss"] = row.metrics->loss;
      if (row.metrics->accuracy) j["accuracy"] = *row.metrics->accuracy;
      if (row.metrics->bits_per_char) j["bits_per_char"] = *row.metrics->bits_per_char;
    } else {
      j["error"] = row.error;
    }
    rows.push_back(j);
  }
  const nlohmann::json j = {{"model", r.model}, {"source", r.source},
                            {"step", r.step},   {"trained_precision", r.trained_precision},
                            {"data", r.data},   {"predictions", r.predictions},
                            {"rows", rows}};
  return j.dump(2) + "\n";
}

}  // namespace mixp::train
