// The built-in models and data sets behind `mixp train` and `mixp compare`.
#include "mixp/train/run.h"

#include <zlib.h>

#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <memory>

#include <nlohmann/json.hpp>
#include "mixp/amp/presets.h"
#include "mixp/data/dataset.h"
#include "mixp/error.h"
#include "mixp/io/checkpoint.h"
#include "mixp/train/trained_model.h"
#include "train/builtin_model.h"
#include "train/run_data.h"
#include "train/run_folder.h"

namespace mixp::train {
namespace {

constexpr const char* kFashionMnist = "/usr/share/datasets/fashion-mnist";
constexpr const char* kKjv = "data/kjv.txt";

class ImageSource : public DataSource {
 public:
  ImageSource(std::shared_ptr<const data::ImageClassification> data, int64_t batch, uint64_t seed)
      : data_(std::move(data)),
        batch_(batch),
        train_(data_->train,
               {.batch_size = batch, .seed = seed, .mean = kImageMean, .std = kImageStd}) {}
  std::optional<data::Batch> next_train() override { return train_.next(); }
  int64_t batches_per_epoch() const override { return train_.batches_per_epoch(); }
  std::optional<data::LoaderState> loader_state() const override { return train_.state(); }
  void set_loader_state(const data::LoaderState& state) override { train_.set_state(state); }
  int64_t batch_size() const override { return batch_; }
  void for_each_eval_batch(const std::function<void(const data::Batch&)>& visit) override {
    for_each_image_eval_batch(data_->test, batch_, visit);
  }

 private:
  std::shared_ptr<const data::ImageClassification> data_;
  int64_t batch_;
  data::ImageLoader train_;
};

class TextSource : public DataSource {
 public:
  TextSource(std::shared_ptr<const data::CharText> text, int64_t batch, int64_t context,
             uint64_t seed)
      : text_(std::move(text)),
        batch_(batch),
        context_(context),
        train_(text_->train_tokens, {.batch_size = batch, .context = context, .seed = seed}) {}
  std::optional<data::Batch> next_train() override { return train_.next(); }
  int64_t batches_per_epoch() const override { return 0; }
  std::optional<data::LoaderState> loader_state() const override { return train_.state(); }
  void set_loader_state(const data::LoaderState& state) override { train_.set_state(state); }
  int64_t batch_size() const override { return batch_; }
  void for_each_eval_batch(const std::function<void(const data::Batch&)>& visit) override {
    data::for_each_text_window(text_->validation_tokens, context_, batch_, visit);
  }

 private:
  std::shared_ptr<const data::CharText> text_;
  int64_t batch_, context_;
  data::TextLoader train_;
};

// The synthetic regression of deep-mlp: batches in order (the inputs are already random), the
// whole test set as one evaluation batch.
class RegressionSource : public DataSource {
 public:
  RegressionSource(std::shared_ptr<const data::Regression> data, int64_t batch)
      : data_(std::move(data)), batch_(batch) {}
  std::optional<data::Batch> next_train() override {
    const int64_t n = data_->train_x.size(0);
    if (state_.position >= n) {
      state_.position = 0;
      ++state_.epoch;
      return std::nullopt;
    }
    const int64_t end = std::min(n, state_.position + batch_);
    data::Batch b{.x = data_->train_x.slice(state_.position, end),
                  .y = data_->train_y.slice(state_.position, end)};
    state_.position = end;
    return b;
  }
  int64_t batches_per_epoch() const override {
    return (data_->train_x.size(0) + batch_ - 1) / batch_;
  }
  std::optional<data::LoaderState> loader_state() const override { return state_; }
  void set_loader_state(const data::LoaderState& state) override { state_ = state; }
  int64_t batch_size() const override { return std::min(batch_, data_->train_x.size(0)); }
  void for_each_eval_batch(const std::function<void(const data::Batch&)>& visit) override {
    visit({.x = data_->test_x, .y = data_->test_y});
  }

 private:
  std::shared_ptr<const data::Regression> data_;
  int64_t batch_;
  data::LoaderState state_;
};

std::string data_path(const RunConfig& config) {
  return config.data.empty() ? default_data_path(config.model.name) : config.data;
}

// Everything a run needs that is loaded once: the data, and the factory of fresh inputs.
struct Prepared {
  TrainOptions options;
  int64_t batch = 0;      // samples a training batch
  nn::ModelConfig model;  // the shape the data gives (classes, image size, vocabulary)
  std::function<RunInputs()> make;
  std::optional<DataFingerprint> data;  // none for synthetic data
};

// A Prepared whose fresh inputs are `model` initialized from `seed` and the data source that
// `make_source` makes.
template <typename MakeSource>
Prepared prepared(const nn::ModelConfig& model, int64_t batch, uint64_t seed,
                  MakeSource make_source) {
  Prepared p;
  p.model = model;
  p.batch = batch;
  p.make = [model, seed, make_source] {
    return RunInputs{std::make_unique<BuiltinModel>(nn::make_model(model, seed)), make_source()};
  };
  return p;
}

Prepared prepare_regression(const RunConfig& config) {
  MIXP_CHECK(config.data.empty(), "model ", config.model.name,
             " trains on synthetic data made from the seed; it takes no --data");
  // The full batch by default: the gradient of the mean squared error shrinks with the
  // batch, and at 4096 samples it is below fp16's range (the point of this model).
  const uint64_t seed = config.train.seed;
  auto data = std::make_shared<const data::Regression>(data::make_tiny_gradient_regression(seed));
  const int64_t batch = config.batch > 0 ? config.batch : data->train_x.size(0);
  return prepared(config.model, batch, seed,
                  [data, batch] { return std::make_unique<RegressionSource>(data, batch); });
}

Prepared prepare_images(const RunConfig& config, const std::string& path) {
  MIXP_CHECK(std::filesystem::is_directory(path), "no IDX data set at ", path,
             config.data.empty()
                 ? ": install Debian's dataset-fashion-mnist (scripts/install-deps.sh) or pass "
                   "--data DIR"
                 : ": --data must be a folder of IDX files");
  const int64_t batch = config.batch > 0 ? config.batch : 64;
  auto data = std::make_shared<const data::ImageClassification>(
      data::load_idx_classification(path, config.model.classes));
  nn::ModelConfig model = config.model;
  model.classes = data->train.classes;
  model.image_size = data->train.images.size(2);
  const uint64_t seed = config.train.seed;
  Prepared p = prepared(model, batch, seed, [data, batch, seed] {
    return std::make_unique<ImageSource>(data, batch, seed);
  });
  p.data = fingerprint_of(path, {data->train.images, data->train.labels});
  return p;
}

Prepared prepare_text(const RunConfig& config, const std::string& path) {
  MIXP_CHECK(std::filesystem::is_regular_file(path), "no text at ", path,
             config.data.empty()
                 ? " (the default corpus of lstm and gpt): run scripts/make-kjv.sh from the "
                   "repository root, or pass --data FILE"
                 : ": --data must be a text file");
  const int64_t batch = config.batch > 0 ? config.batch : 16;
  MIXP_CHECK(config.val_fraction > 0 && config.val_fraction < 1,
             "the validation fraction must be in (0, 1), got ", config.val_fraction);
  auto text = std::make_shared<const data::CharText>(
      data::load_char_text(path, {.validation_fraction = config.val_fraction}));
  MIXP_CHECK(text->validation_tokens.numel() >= 2, path, ": the validation split holds ",
             text->validation_tokens.numel(),
             " characters; at least 2 are needed. Use a longer text or a larger --val-fraction");
  nn::ModelConfig model = config.model;
  model.vocab = int64_t(text->vocabulary.size());
  const int64_t context = model.context;
  const uint64_t seed = config.train.seed;
  Prepared p = prepared(model, batch, seed, [text, batch, context, seed] {
    return std::make_unique<TextSource>(text, batch, context, seed);
  });
  p.options.steps = config.train.steps;
  if (p.options.steps == 0) {
    const int64_t per_epoch = std::max<int64_t>(1, text->train_tokens.numel() / (batch * context));
    p.options.steps = config.train.epochs * per_epoch;
  }
  p.data = fingerprint_of_tokens(path, text->train_tokens);
  p.data->vocabulary = text->vocabulary;
  return p;
}

// Fine-tuning: every fresh model starts from the weights at config.init_from, read once.
void start_from_trained(Prepared& p, RunConfig& config) {
  config.init_from = std::filesystem::absolute(config.init_from).lexically_normal().string();
  auto init = std::make_shared<const TrainedWeights>(read_trained_weights(config.init_from));
  if (p.data && !p.data->vocabulary.empty()) {
    const std::string& theirs = init->config.fingerprint->vocabulary;
    std::string only_data, only_model;
    for (const char ch : p.data->vocabulary)
      if (theirs.find(ch) == std::string::npos) only_data += ch;
    for (const char ch : theirs)
      if (p.data->vocabulary.find(ch) == std::string::npos) only_model += ch;
    MIXP_CHECK(theirs == p.data->vocabulary, "--init-from ", init->source,
               ": the model's vocabulary of ", theirs.size(), " characters is not the data's (",
               p.data->vocabulary.size(), "): characters only in the data: '", only_data,
               "', only in the model: '", only_model,
               "'. A text model reads only the characters it was trained on");
  }
  auto make = p.make;
  p.make = [make, init] {
    RunInputs inputs = make();
    load_weights(dynamic_cast<BuiltinModel&>(*inputs.model).model(), init->tensors, init->source);
    return inputs;
  };
}

Prepared prepare(RunConfig config) {
  const nn::Task task = task_of(config.model.name);
  validate_options(config.train);  // bad options fail before the data is loaded
  MIXP_CHECK(config.batch >= 0, "the batch size must be positive, got ", config.batch);
  const std::string path =
      task == nn::Task::regression
          ? ""
          : std::filesystem::absolute(data_path(config)).lexically_normal().string();
  Prepared p = task == nn::Task::regression       ? prepare_regression(config)
               : task == nn::Task::classification ? prepare_images(config, path)
                                                  : prepare_text(config, path);
  const int64_t steps = p.options.steps;
  p.options = config.train;
  if (task == nn::Task::language_model) p.options.steps = steps;
  p.options.model_name = config.model.name;
  if (config.fingerprint && p.data)
    check_fingerprint(*config.fingerprint, *p.data,
                      "Resume with the run's own data (--data), or start a new run");
  if (p.data) p.options.vocabulary = p.data->vocabulary;
  if (task != nn::Task::regression) config.data = path;  // a resume from elsewhere finds it
  config.model = p.model;  // so that the stored config rebuilds the model alone
  MIXP_CHECK(p.batch % config.train.grad_accum == 0, "a batch of ", p.batch,
             " samples does not split into ", config.train.grad_accum,
             " equal micro-batches (--grad-accum); choose a batch that is a multiple of it");
  if (!config.init_from.empty()) start_from_trained(p, config);
  if (p.options.config.empty())
    p.options.config = run_config_json(config, p.data ? &*p.data : nullptr);
  return p;
}

}  // namespace

namespace {

uint32_t crc32_of(uint32_t crc, const Tensor& t) {
  const auto* bytes = static_cast<const Bytef*>(t.raw_data());
  for (size_t done = 0, n = t.nbytes(); done < n;) {
    const uInt chunk = uInt(std::min<size_t>(n - done, 1u << 30));
    crc = uint32_t(::crc32(crc, bytes + done, chunk));
    done += chunk;
  }
  return crc;
}

}  // namespace

// The tokens' crc32 and size as 8-byte ids, which is how runs recorded them before tokens were
// held in one byte: a run started then resumes with the same fingerprint.
DataFingerprint fingerprint_of_tokens(const std::string& path, const Tensor& tokens) {
  DataFingerprint f;
  f.path = path;
  f.crc32 = uint32_t(::crc32(0L, Z_NULL, 0));
  constexpr int64_t kChunk = 1 << 16;
  std::vector<int64_t> wide(static_cast<size_t>(kChunk));
  const uint8_t* narrow = tokens.data<uint8_t>();
  for (int64_t done = 0, n = tokens.numel(); done < n; done += kChunk) {
    const int64_t count = std::min(kChunk, n - done);
    std::copy(narrow + done, narrow + done + count, wide.begin());
    f.crc32 = uint32_t(::crc32(f.crc32, reinterpret_cast<const Bytef*>(wide.data()),
                               uInt(count * int64_t(sizeof(int64_t)))));
  }
  f.bytes = tokens.numel() * int64_t(sizeof(int64_t));
  return f;
}

DataFingerprint fingerprint_of(const std::string& path, const std::vector<Tensor>& train_split) {
  DataFingerprint f;
  f.path = path;
  f.crc32 = uint32_t(::crc32(0L, Z_NULL, 0));
  for (const Tensor& t : train_split) {
    f.bytes += int64_t(t.nbytes());
    f.crc32 = crc32_of(f.crc32, t);
  }
  return f;
}

void check_fingerprint(const DataFingerprint& expected, const DataFingerprint& found,
                       const std::string& advice) {
  auto describe = [](const DataFingerprint& f) {
    char crc[16];
    std::snprintf(crc, sizeof crc, "%08x", f.crc32);
    return std::to_string(f.bytes) + " bytes of training data with crc32 " + crc;
  };
  MIXP_CHECK(expected.bytes == found.bytes && expected.crc32 == found.crc32 &&
                 expected.vocabulary == found.vocabulary,
             "the data at ", found.path, " is not the data this run trained on: the run expects ",
             describe(expected),
             expected.vocabulary == found.vocabulary ? "" : " and another vocabulary", " (from ",
             expected.path, "), and found ", describe(found), ". ", advice);
}

void for_each_image_eval_batch(const data::ImageSet& test, int64_t train_batch,
                               const std::function<void(const data::Batch&)>& visit) {
  data::ImageLoader loader(test, {.batch_size = std::max<int64_t>(train_batch, 256),
                                  .shuffle = false,
                                  .mean = kImageMean,
                                  .std = kImageStd});
  while (auto batch = loader.next()) visit(*batch);
}

nn::Task task_of(const std::string& model_name) {
  if (model_name == "mlp" || model_name == "cnn") return nn::Task::classification;
  if (model_name == "lstm" || model_name == "gpt") return nn::Task::language_model;
  if (model_name == "deep-mlp") return nn::Task::regression;
  MIXP_CHECK(false, "unknown model '", model_name, "' (mlp, cnn, lstm, gpt or deep-mlp)");
  return nn::Task::classification;
}

std::string default_data_path(const std::string& model_name) {
  const nn::Task task = task_of(model_name);
  if (task == nn::Task::classification) return kFashionMnist;
  if (task == nn::Task::regression) return "";
  return kKjv;
}

namespace {

nlohmann::json optional_json(const auto& v) {
  return v ? nlohmann::json(*v) : nlohmann::json(nullptr);
}

nlohmann::json train_json(const TrainOptions& t) {
  const OptimizerConfig& o = t.optimizer;
  return {{"precision", t.precision},
          {"optimizer_state", name_of(optimizer_state_dtype(t))},
          {"mx_scale_rounding", amp::name_of(t.mx_scale_rounding)},
          {"fp4_without", amp::name_of(t.fp4_without)},
          {"epochs", t.epochs},
          {"steps", t.steps},
          {"lr", optional_json(t.lr)},
          {"optimizer",
           {{"name", o.name},
            {"weight_decay", optional_json(o.weight_decay)},
            {"betas", optional_json(o.betas)},
            {"eps", o.eps},
            {"momentum", o.momentum},
            {"nesterov", o.nesterov}}},
          {"schedule",
           {{"name", t.schedule.name},
            {"warmup_steps", optional_json(t.schedule.warmup_steps)},
            {"min_lr", optional_json(t.schedule.min_lr)}}},
          {"limits",
           {{"min_loss_scale", t.limits.min_loss_scale},
            {"max_skipped_in_a_row", t.limits.max_skipped_in_a_row},
            {"max_skipped_fraction", t.limits.max_skipped_fraction}}},
          {"seed", t.seed},
          {"threads", t.threads},
          {"eval_interval", t.eval_interval},
          {"log_interval", t.log_interval},
          {"grad_accum", t.grad_accum},
          {"parallel",
           {{"reduce_dtype", t.parallel.reduce_dtype},
            {"deterministic", t.parallel.deterministic},
            {"bucket_bytes", t.parallel.bucket_bytes},
            {"first_bucket_bytes", t.parallel.first_bucket_bytes},
            {"check_replicas", t.parallel.check_replicas},
            {"zero", t.parallel.zero}}},
          {"clip_norm", t.clip_norm},
          {"checkpoint_every", t.checkpoint_every},
          {"keep_checkpoints", t.keep_checkpoints},
          {"scaler_growth_interval", t.scaler_growth_interval},
          {"scaler_underflow_fraction", t.scaler_underflow_fraction},
          {"scaler_underflow_check_interval", t.scaler_underflow_check_interval},
          {"on_nonfinite", name_of(t.on_nonfinite)},
          {"sample_every", t.sample_every},
          {"sample_tokens", t.sample_tokens}};
}

// The settings added after the first checkpoints were written take their defaults when absent.
void read_train_settings(const nlohmann::json& t, TrainOptions& c) {
  c.precision = t.at("precision").get<std::string>();
  c.optimizer_state = t.value("optimizer_state", std::string("f32"));
  c.mx_scale_rounding = amp::parse_mx_scale_rounding(
      t.value("mx_scale_rounding", std::string(amp::name_of(amp::kLegacyMxScaleRounding))));
  c.fp4_without = amp::parse_fp4_ablation(t.value("fp4_without", std::string()));
  c.epochs = t.at("epochs").get<int64_t>();
  c.steps = t.at("steps").get<int64_t>();
  if (!t.at("lr").is_null()) c.lr = t.at("lr").get<double>();
  if (const auto o = t.find("optimizer"); o != t.end()) {
    c.optimizer.name = o->at("name").get<std::string>();
    if (!o->at("weight_decay").is_null())
      c.optimizer.weight_decay = o->at("weight_decay").get<double>();
    if (!o->at("betas").is_null()) c.optimizer.betas = o->at("betas").get<std::array<double, 2>>();
    c.optimizer.eps = o->at("eps").get<double>();
    c.optimizer.momentum = o->at("momentum").get<double>();
    c.optimizer.nesterov = o->at("nesterov").get<bool>();
  }
  if (const auto s = t.find("schedule"); s != t.end()) {
    c.schedule.name = s->at("name").get<std::string>();
    if (!s->at("warmup_steps").is_null())
      c.schedule.warmup_steps = s->at("warmup_steps").get<int64_t>();
    if (!s->at("min_lr").is_null()) c.schedule.min_lr = s->at("min_lr").get<double>();
  }
  if (const auto l = t.find("limits"); l != t.end()) {
    c.limits.min_loss_scale = l->at("min_loss_scale").get<double>();
    c.limits.max_skipped_in_a_row = l->at("max_skipped_in_a_row").get<int64_t>();
    c.limits.max_skipped_fraction = l->at("max_skipped_fraction").get<double>();
  }
  c.seed = t.at("seed").get<uint64_t>();
  c.threads = t.at("threads").get<int>();
  c.eval_interval = t.at("eval_interval").get<int64_t>();
  c.log_interval = t.at("log_interval").get<int64_t>();
  c.grad_accum = t.value("grad_accum", int64_t{1});
  if (const auto p = t.find("parallel"); p != t.end()) {
    c.parallel.reduce_dtype = p->at("reduce_dtype").get<std::string>();
    c.parallel.deterministic = p->at("deterministic").get<bool>();
    c.parallel.bucket_bytes = p->at("bucket_bytes").get<int64_t>();
    c.parallel.first_bucket_bytes = p->at("first_bucket_bytes").get<int64_t>();
    c.parallel.check_replicas = p->at("check_replicas").get<bool>();
    c.parallel.zero = p->value("zero", 0);
  }
  c.clip_norm = t.at("clip_norm").get<double>();
  c.checkpoint_every = t.at("checkpoint_every").get<int64_t>();
  c.keep_checkpoints = t.at("keep_checkpoints").get<int>();
  c.scaler_growth_interval = t.at("scaler_growth_interval").get<int64_t>();
  c.scaler_underflow_fraction = t.value("scaler_underflow_fraction", 0.0);
  c.scaler_underflow_check_interval = t.value("scaler_underflow_check_interval", int64_t{1});
  c.on_nonfinite = parse_on_nonfinite(t.value("on_nonfinite", std::string("stop")));
  c.sample_every = t.value("sample_every", int64_t{0});
  c.sample_tokens = t.value("sample_tokens", int64_t{200});
}

}  // namespace

std::string run_config_json(const RunConfig& c, const DataFingerprint* data) {
  const nn::ModelConfig& m = c.model;
  nlohmann::json j = {{"model",
                       {{"name", m.name},
                        {"layers", m.layers},
                        {"heads", m.heads},
                        {"width", m.width},
                        {"context", m.context},
                        {"dropout", m.dropout},
                        {"classes", m.classes},
                        {"image_size", m.image_size},
                        {"vocab", m.vocab}}},
                      {"data", c.data},
                      {"batch", c.batch},
                      {"val_fraction", c.val_fraction},
                      {"init_from", c.init_from},
                      {"train", train_json(c.train)},
                      {"mixp_version", version()}};
  const DataFingerprint* f = data ? data : (c.fingerprint ? &*c.fingerprint : nullptr);
  if (f)
    j["data_fingerprint"] = {
        {"path", f->path}, {"bytes", f->bytes}, {"crc32", f->crc32}, {"vocabulary", f->vocabulary}};
  return j.dump();
}

RunConfig run_config_from_json(const std::string& text) {
  RunConfig c;
  try {
    const nlohmann::json j = nlohmann::json::parse(text);
    const nlohmann::json& m = j.at("model");
    c.model.name = m.at("name").get<std::string>();
    c.model.layers = m.at("layers").get<decltype(c.model.layers)>();
    c.model.heads = m.at("heads").get<decltype(c.model.heads)>();
    c.model.width = m.at("width").get<int64_t>();
    c.model.context = m.at("context").get<int64_t>();
    c.model.dropout = m.at("dropout").get<double>();
    c.model.classes = m.at("classes").get<decltype(c.model.classes)>();
    c.model.image_size = m.value("image_size", c.model.image_size);  // absent in older runs
    c.model.vocab = m.value("vocab", c.model.vocab);
    c.data = j.at("data").get<std::string>();
    c.batch = j.at("batch").get<int64_t>();
    c.val_fraction = j.value("val_fraction", 0.1);
    c.init_from = j.value("init_from", std::string());
    read_train_settings(j.at("train"), c.train);
    if (const auto f = j.find("data_fingerprint"); f != j.end())
      c.fingerprint = DataFingerprint{.path = f->at("path").get<std::string>(),
                                      .bytes = f->at("bytes").get<int64_t>(),
                                      .crc32 = f->at("crc32").get<uint32_t>(),
                                      .vocabulary = f->at("vocabulary").get<std::string>()};
  } catch (const nlohmann::json::exception& e) {
    MIXP_CHECK(false, "the run's configuration does not read: ", e.what());
  }
  return c;
}

RunConfig resume_config(const std::string& dir,
                        const std::function<void(const std::string&)>& skipped) {
  std::optional<RunConfig> config;
  const auto c = io::read_newest_checkpoint(
      dir, folder_run_id(dir),
      [&](const io::Checkpoint& ckpt) {
        io::check_finite(ckpt.file, ckpt.path);  // as train() will refuse it
        const auto it = ckpt.file.metadata.find("config");
        MIXP_CHECK(it != ckpt.file.metadata.end() && !it->second.empty(), ckpt.path,
                   ": no run config in the metadata");
        config = run_config_from_json(it->second);
      },
      skipped);
  MIXP_CHECK(c.has_value() && config.has_value(), "--resume: no usable checkpoint in ", dir);
  config->train.out_dir = dir;
  config->train.resume = true;
  return *config;
}

PreparedRun prepare_run(const RunConfig& config) {
  Prepared p = prepare(config);
  return {.options = p.options, .inputs = p.make()};
}

TrainResult run_train(const RunConfig& config) {
  Prepared p = prepare(config);
  RunInputs inputs = p.make();
  return train(*inputs.model, *inputs.data, p.options);
}

CompareResult run_compare(const RunConfig& config, const std::vector<std::string>& precisions) {
  MIXP_CHECK(!precisions.empty(), "compare: no precisions given");
  for (const std::string& name : precisions) (void)amp::preset(name);
  Prepared p = prepare(config);
  return compare(p.make, precisions, p.options);
}

}  // namespace mixp::train
