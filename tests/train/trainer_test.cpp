// The trainer on models and data defined here (the built-in ones are tested with the CLI):
// run files, metrics, determinism, presets, language models and compare.
#include "mixp/train/trainer.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>

#include "mixp/autograd.h"
#include "mixp/error.h"
#include "mixp/io/checkpoint.h"
#include "mixp/io/safetensors.h"
#include "mixp/ops.h"
#include "mixp/random.h"
#include "support/xml_check.h"

namespace mixp {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;

// Softmax regression on 4x4 images: logits = x W^T + b. The bias counts as a norm parameter,
// so that presets that keep norms in fp32 keep it; `seen` is a buffer.
class TinyClassifier : public train::TrainModel {
 public:
  explicit TinyClassifier(uint64_t seed) {
    Philox rng(PhiloxState{seed, 1, 0});
    weight_ = randn({3, 16}, rng, 0.1, DType::f32, MemoryTag::parameter).set_requires_grad(true);
    bias_ = zeros({3}, DType::f32, MemoryTag::parameter).set_requires_grad(true);
    seen_ = zeros({1}, DType::i64, MemoryTag::parameter);
  }
  Tensor forward(const Tensor& x) override {
    EXPECT_EQ(training_, !NoGradActive());
    return ops::linear(x.reshape({x.size(0), 16}), weight_, bias_);
  }
  nn::Task task() const override { return nn::Task::classification; }
  std::vector<std::pair<std::string, Tensor*>> named_parameters() override {
    return {{"fc.weight", &weight_}, {"fc.bias", &bias_}};
  }
  std::vector<std::pair<std::string, Tensor*>> named_buffers() override {
    return {{"seen", &seen_}};
  }
  std::vector<bool> norm_parameter_flags() override { return {false, true}; }
  void set_training(bool training) override { training_ = training; }
  const Tensor& weight() const { return weight_; }

 private:
  static bool NoGradActive() { return !grad_mode_enabled(); }
  Tensor weight_, bias_, seen_;
  bool training_ = true;
};

// Three Gaussian blobs in 16 dimensions; batches in an order shuffled per epoch from the seed.
class BlobData : public train::DataSource {
 public:
  BlobData(uint64_t seed, int64_t train_n = 96, int64_t test_n = 48, int64_t batch = 16)
      : seed_(seed), batch_(batch) {
    make(train_n, 100, train_x_, train_y_);
    make(test_n, 200, test_x_, test_y_);
    shuffle();
  }
  std::optional<data::Batch> next_train() override {
    const int64_t n = train_y_.numel();
    if (position_ >= n) {
      position_ = 0;
      ++epoch_;
      shuffle();
      return std::nullopt;
    }
    const int64_t count = std::min(batch_, n - position_);
    std::vector<double> x, y;
    const std::vector<double> all_x = train_x_.to_vector(), all_y = train_y_.to_vector();
    for (int64_t i = 0; i < count; ++i) {
      const int64_t s = order_[size_t(position_ + i)];
      x.insert(x.end(), all_x.begin() + s * 16, all_x.begin() + (s + 1) * 16);
      y.push_back(all_y[size_t(s)]);
    }
    position_ += count;
    return data::Batch{from_values(x, {count, 1, 4, 4}), from_values(y, {count}, DType::i64)};
  }
  int64_t batches_per_epoch() const override { return (train_y_.numel() + batch_ - 1) / batch_; }
  std::optional<data::LoaderState> loader_state() const override {
    return data::LoaderState{PhiloxState{seed_, 300 + uint64_t(epoch_), 0}, epoch_, position_};
  }
  void set_loader_state(const data::LoaderState& state) override {
    epoch_ = state.epoch;
    position_ = state.position;
    shuffle();
  }
  void for_each_eval_batch(const std::function<void(const data::Batch&)>& visit) override {
    const int64_t n = test_y_.numel();
    for (int64_t b = 0; b < n; b += batch_) {
      const int64_t e = std::min(n, b + batch_);
      visit(data::Batch{test_x_.slice(b, e).reshape({e - b, 1, 4, 4}), test_y_.slice(b, e)});
    }
  }

 private:
  void make(int64_t n, uint64_t stream, Tensor& x, Tensor& y) {
    Philox rng(PhiloxState{seed_, stream, 0});
    std::vector<double> xs, ys;
    for (int64_t i = 0; i < n; ++i) {
      const int64_t label = i % 3;
      for (int64_t d = 0; d < 16; ++d)
        xs.push_back((d % 3 == label ? 1.5 : 0.0) + 0.5 * double(rng.normal()));
      ys.push_back(double(label));
    }
    x = from_values(xs, {n, 16});
    y = from_values(ys, {n}, DType::i64);
  }
  void shuffle() {
    const int64_t n = train_y_.numel();
    order_.resize(size_t(n));
    for (int64_t i = 0; i < n; ++i) order_[size_t(i)] = i;
    Philox rng(PhiloxState{seed_, 300 + uint64_t(epoch_), 0});
    for (int64_t i = n - 1; i > 0; --i)
      std::swap(order_[size_t(i)], order_[rng.next_u32() % uint64_t(i + 1)]);
  }
  uint64_t seed_;
  int64_t batch_;
  Tensor train_x_, train_y_, test_x_, test_y_;
  std::vector<int64_t> order_;
  int64_t position_ = 0, epoch_ = 0;
};

// A bigram character model: logits[b, t] = table[tokens[b, t]].
class Bigram : public train::TrainModel {
 public:
  explicit Bigram(int64_t vocab) {
    Philox rng(PhiloxState{0, 2, 0});
    table_ =
        randn({vocab, vocab}, rng, 0.02, DType::f32, MemoryTag::parameter).set_requires_grad(true);
  }
  Tensor forward(const Tensor& tokens) override { return ops::embedding(table_, tokens); }
  nn::Task task() const override { return nn::Task::language_model; }
  std::vector<std::pair<std::string, Tensor*>> named_parameters() override {
    return {{"table", &table_}};
  }
  std::vector<std::pair<std::string, Tensor*>> named_buffers() override { return {}; }
  std::vector<bool> norm_parameter_flags() override { return {false}; }
  void set_training(bool) override {}

 private:
  Tensor table_;
};

// Text "abcdabcd..." with some noise: random windows, and fixed validation windows.
class PatternText : public train::DataSource {
 public:
  std::optional<data::Batch> next_train() override { return window(rng_); }
  int64_t batches_per_epoch() const override { return 0; }
  std::optional<data::LoaderState> loader_state() const override {
    return data::LoaderState{rng_.state(), 0, 0};
  }
  void set_loader_state(const data::LoaderState& state) override { rng_.set_state(state.rng); }
  void for_each_eval_batch(const std::function<void(const data::Batch&)>& visit) override {
    Philox rng(PhiloxState{9, 9, 0});
    for (int i = 0; i < 2; ++i) visit(window(rng));
  }

 private:
  data::Batch window(Philox& rng) {
    std::vector<double> x, y;
    for (int b = 0; b < 4; ++b) {
      const uint32_t start = rng.next_u32() % 4;
      for (int t = 0; t < 8; ++t) {
        x.push_back(double((start + uint32_t(t)) % 4));
        y.push_back(double((start + uint32_t(t) + 1) % 4));
      }
    }
    return {from_values(x, {4, 8}, DType::i64), from_values(y, {4, 8}, DType::i64)};
  }
  Philox rng_{PhiloxState{1, 1, 0}};
};

class Trainer : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() /
           ("mixp_train_test_" + std::to_string(::getpid()) + "_" +
            ::testing::UnitTest::GetInstance()->current_test_info()->name());
    fs::remove_all(dir_);
  }
  void TearDown() override { fs::remove_all(dir_); }
  static std::string slurp(const fs::path& p) {
    std::ifstream in(p, std::ios::binary);
    std::stringstream s;
    s << in.rdbuf();
    return s.str();
  }
  train::TrainOptions options(const std::string& precision = "fp32") const {
    return {.model_name = "tiny",
            .precision = precision,
            .epochs = 3,
            .lr = 0.05,
            .out_dir = dir_.string(),
            .log_interval = 2,
            .progress = train::Progress::none,
            .log = nullptr};
  }
  fs::path dir_;
};

TEST_F(Trainer, WritesEveryRunFile) {
  TinyClassifier model(0);
  BlobData data(0);
  const train::TrainResult r = train::train(model, data, options());
  EXPECT_EQ(r.steps, 18);
  EXPECT_EQ(r.epochs, 3);
  for (const char* f : {"metrics.jsonl", "summary.json", "model.safetensors", "loss.svg"})
    EXPECT_TRUE(fs::is_regular_file(dir_ / f)) << f;

  // metrics.jsonl: one valid JSON object per logged step.
  std::istringstream lines(slurp(dir_ / "metrics.jsonl"));
  std::string line;
  size_t n = 0;
  while (std::getline(lines, line)) {
    const json j = json::parse(line);
    for (const char* k : {"step", "epoch", "loss", "lr", "scale", "samples_per_s", "ms"})
      EXPECT_TRUE(j.contains(k) && j[k].is_number()) << k << " in " << line;
    ASSERT_LT(n, r.log.size());
    EXPECT_EQ(j["step"], r.log[n].step);
    EXPECT_EQ(j["step"].get<int64_t>(), int64_t(2 * (n + 1)));
    ++n;
  }
  EXPECT_EQ(n, 9u);
  EXPECT_EQ(n, r.log.size());

  const json s = json::parse(slurp(dir_ / "summary.json"));
  for (const char* k : {"model", "precision", "steps", "final_train_loss", "final_eval_loss",
                        "test_accuracy", "bits_per_char", "median_step_ms", "samples_per_s",
                        "peak_memory_bytes", "final_loss_scale", "skipped_steps", "evals"})
    EXPECT_TRUE(s.contains(k)) << k;
  EXPECT_EQ(s["model"], "tiny");
  EXPECT_EQ(s["precision"], "fp32");
  EXPECT_EQ(s["steps"], 18);
  EXPECT_TRUE(s["test_accuracy"].is_number());
  EXPECT_TRUE(s["bits_per_char"].is_null());
  for (const char* tag : {"parameter", "gradient", "optimizer_state", "activation", "total"})
    EXPECT_TRUE(s["peak_memory_bytes"].contains(tag)) << tag;
  EXPECT_GE(s["peak_memory_bytes"]["parameter"].get<int64_t>(), 4 * (48 + 3));
  EXPECT_EQ(s["evals"].size(), 3u);  // one per epoch
  EXPECT_EQ(s["skipped_steps"], 0);

  const io::SafetensorsFile f = io::read_safetensors((dir_ / "model.safetensors").string());
  ASSERT_EQ(f.tensors.size(), 3u);
  EXPECT_EQ(f.tensors.at("fc.weight").shape(), Shape({3, 16}));
  EXPECT_EQ(f.tensors.at("seen").dtype(), DType::i64);
  EXPECT_EQ(f.tensors.at("fc.weight").to_vector(), model.weight().to_vector());
  EXPECT_EQ(f.metadata.at("format"), "pt");

  test::XmlCheck svg = test::check_xml(slurp(dir_ / "loss.svg"));
  ASSERT_TRUE(svg.ok) << svg.error;
  EXPECT_EQ(svg.elements["path"], 2);  // train and eval
}

TEST_F(Trainer, LossDecreasesAndTheClassifierLearns) {
  TinyClassifier model(0);
  BlobData data(0);
  const train::TrainResult r = train::train(model, data, options());
  ASSERT_GE(r.log.size(), 2u);
  EXPECT_LT(r.log.back().loss, 0.5 * r.log.front().loss);
  EXPECT_LT(r.evals.back().loss, r.evals.front().loss * 1.01);
  ASSERT_TRUE(r.test_accuracy);
  EXPECT_GT(*r.test_accuracy, 0.9);
  EXPECT_FALSE(r.bits_per_char);
}

TEST_F(Trainer, SameSeedGivesTheSameMetricsAndWeights) {
  auto run = [&](uint64_t seed, const std::string& precision) {
    TinyClassifier model(seed);
    BlobData data(seed);
    train::TrainOptions o = options(precision);
    o.out_dir.clear();
    o.seed = seed;
    train::TrainResult r = train::train(model, data, o);
    return std::make_pair(r, model.weight().to_vector());
  };
  for (const char* precision : {"fp32", "amp-fp16", "bf16-sr"}) {
    const auto [a, wa] = run(3, precision);
    const auto [b, wb] = run(3, precision);
    ASSERT_EQ(a.log.size(), b.log.size());
    for (size_t i = 0; i < a.log.size(); ++i) {
      EXPECT_EQ(a.log[i].loss, b.log[i].loss) << precision << " log " << i;
      EXPECT_EQ(a.log[i].lr, b.log[i].lr);
      EXPECT_EQ(a.log[i].scale, b.log[i].scale);
    }
    EXPECT_EQ(a.final_eval_loss, b.final_eval_loss) << precision;
    EXPECT_EQ(wa, wb) << precision;
    const auto [c, wc] = run(4, precision);
    EXPECT_NE(wa, wc) << precision << ": another seed, other weights";
  }
}

TEST_F(Trainer, PresetsSetDTypesAndTheLossScale) {
  {
    TinyClassifier model(0);
    BlobData data(0);
    const train::TrainResult r = train::train(model, data, options("amp-fp16"));
    EXPECT_EQ(r.log.front().scale, 65536.0);
    EXPECT_EQ(r.final_loss_scale, 65536.0);  // 18 clean steps: no growth before 2000
    EXPECT_EQ(r.precision, "amp-fp16");
    EXPECT_GT(*r.test_accuracy, 0.9);
  }
  {
    TinyClassifier model(0);
    BlobData data(0);
    const train::TrainResult r = train::train(model, data, options("bf16"));
    EXPECT_EQ(r.log.front().scale, 1.0);
    EXPECT_GT(r.peak_memory.at("master"), 0);  // fp32 master copy of the bf16 weight
    const io::SafetensorsFile f = io::read_safetensors((dir_ / "model.safetensors").string());
    EXPECT_EQ(f.tensors.at("fc.weight").dtype(), DType::bf16);
    EXPECT_EQ(f.tensors.at("fc.bias").dtype(), DType::f32);  // a norm parameter stays fp32
    EXPECT_EQ(f.metadata.at("precision"), "bf16");
    EXPECT_GT(*r.test_accuracy, 0.9);
  }
}

TEST_F(Trainer, Fp8PresetsTrainTheClassifier) {
  for (const char* precision : {"fp8", "fp8-current", "mxfp8", "fp8-block"}) {
    TinyClassifier model(0);
    BlobData data(0);
    const train::TrainResult r = train::train(model, data, options(precision));
    EXPECT_EQ(r.precision, precision);
    EXPECT_LT(r.log.back().loss, 0.5 * r.log.front().loss) << precision;
    EXPECT_GT(*r.test_accuracy, 0.9) << precision;
    EXPECT_EQ(r.final_loss_scale, 1.0);  // no loss scaling
  }
}

TEST_F(Trainer, StepsOverrideEpochs) {
  TinyClassifier model(0);
  BlobData data(0);
  train::TrainOptions o = options();
  o.steps = 7;
  o.log_interval = 5;
  o.eval_interval = 3;
  const train::TrainResult r = train::train(model, data, o);
  EXPECT_EQ(r.steps, 7);
  ASSERT_EQ(r.log.size(), 2u);  // steps 5 and 7
  EXPECT_EQ(r.log[1].step, 7);
  ASSERT_EQ(r.evals.size(), 3u);  // steps 3, 6 and the end
  EXPECT_EQ(r.evals[2].step, 7);
}

TEST_F(Trainer, LanguageModelReportsBitsPerCharAndWarmsUp) {
  Bigram model(4);
  PatternText data;
  train::TrainOptions o = options();
  o.steps = 40;
  o.lr = 0.1;
  const train::TrainResult r = train::train(model, data, o);
  EXPECT_EQ(r.task, nn::Task::language_model);
  ASSERT_TRUE(r.bits_per_char);
  EXPECT_FALSE(r.test_accuracy);
  EXPECT_NEAR(*r.bits_per_char, r.final_eval_loss / std::log(2.0), 1e-12);
  EXPECT_EQ(r.evals.size(), 5u);  // every steps / 5
  EXPECT_LT(r.final_eval_loss, r.evals.front().loss);
  EXPECT_LT(r.final_eval_loss, 0.5 * std::log(4.0));
  // Warmup over the first 4 steps, then cosine decay to lr / 10.
  EXPECT_LT(r.log.front().lr, 0.1);
  EXPECT_LT(r.log.back().lr, r.log[2].lr);
  const json s = json::parse(slurp(dir_ / "summary.json"));
  EXPECT_TRUE(s["bits_per_char"].is_number());
  EXPECT_TRUE(s["test_accuracy"].is_null());
}

TEST_F(Trainer, BadOptionsAreErrors) {
  TinyClassifier model(0);
  BlobData data(0);
  train::TrainOptions o = options("fp33");
  EXPECT_THROW(train::train(model, data, o), Error);
  o = options();
  o.lr = -1.0;
  EXPECT_THROW(train::train(model, data, o), Error);
  Bigram lm(4);
  PatternText text;
  o = options();  // epochs, but text has none
  EXPECT_THROW(train::train(lm, text, o), Error);
}

TEST_F(Trainer, CompareWritesOneRunAndOneCurvePerPrecision) {
  const std::vector<std::string> precisions = {"fp32", "amp-bf16", "amp-fp16"};
  train::TrainOptions o = options();
  o.epochs = 1;
  const train::CompareResult c = train::compare(
      [] {
        return train::RunInputs{std::make_unique<TinyClassifier>(0), std::make_unique<BlobData>(0)};
      },
      precisions, o);
  ASSERT_EQ(c.rows.size(), 3u);
  EXPECT_EQ(c.baseline, "fp32");
  EXPECT_EQ(c.rows[0].speed_vs_baseline, 1.0);
  EXPECT_EQ(c.rows[0].memory_vs_baseline, 1.0);
  // The same initialization and data: the first step's loss is the same under amp-fp16's
  // scaling as in fp32 up to the fp16 rounding of the forward pass.
  EXPECT_NEAR(c.rows[2].result.log.front().loss, c.rows[0].result.log.front().loss, 0.05);
  for (const std::string& p : precisions)
    for (const char* f : {"metrics.jsonl", "summary.json", "model.safetensors", "loss.svg"})
      EXPECT_TRUE(fs::is_regular_file(dir_ / p / f)) << p << "/" << f;
  const json j = json::parse(slurp(dir_ / "compare.json"));
  EXPECT_EQ(j["baseline"], "fp32");
  ASSERT_EQ(j["runs"].size(), 3u);
  for (size_t i = 0; i < 3; ++i) {
    EXPECT_EQ(j["runs"][i]["precision"], precisions[i]);
    EXPECT_TRUE(j["runs"][i]["speed_vs_baseline"].is_number());
    EXPECT_TRUE(j["runs"][i]["memory_vs_baseline"].is_number());
    EXPECT_TRUE(j["runs"][i]["test_accuracy"].is_number());
  }
  test::XmlCheck svg = test::check_xml(slurp(dir_ / "compare.svg"));
  ASSERT_TRUE(svg.ok) << svg.error;
  EXPECT_EQ(svg.elements["path"], 3);
  const std::string table = train::compare_table(c);
  for (const std::string& p : precisions) EXPECT_NE(table.find(p), std::string::npos);
  EXPECT_THROW(train::compare([] { return train::RunInputs{}; }, {"fp32", "fp32"}, o), Error);
}

// Resume equivalence: a run stopped halfway (stop_requested, which writes a checkpoint) and
// resumed ends bitwise where the uninterrupted run ends: parameters, buffers and loss history.
struct Finished {
  train::TrainResult result;
  std::map<std::string, std::vector<uint8_t>> bytes;  // every tensor of model.safetensors
};

std::map<std::string, std::vector<uint8_t>> tensor_bytes(const fs::path& file) {
  std::map<std::string, std::vector<uint8_t>> out;
  for (const auto& [name, t] : io::read_safetensors(file.string()).tensors) {
    const std::vector<uint8_t> encoded = io::encode_safetensors({{name, t}});
    out[name] = encoded;  // header and data: dtype, shape and bits
  }
  return out;
}

void expect_same_history(const train::TrainResult& a, const train::TrainResult& b) {
  ASSERT_EQ(a.log.size(), b.log.size());
  for (size_t i = 0; i < a.log.size(); ++i) {
    EXPECT_EQ(a.log[i].step, b.log[i].step);
    EXPECT_EQ(a.log[i].loss, b.log[i].loss) << "step " << a.log[i].step;  // bit for bit
    EXPECT_EQ(a.log[i].lr, b.log[i].lr);
    EXPECT_EQ(a.log[i].scale, b.log[i].scale);
  }
  ASSERT_EQ(a.evals.size(), b.evals.size());
  for (size_t i = 0; i < a.evals.size(); ++i) EXPECT_EQ(a.evals[i].loss, b.evals[i].loss);
  EXPECT_EQ(a.skipped_steps, b.skipped_steps);
  EXPECT_EQ(a.final_loss_scale, b.final_loss_scale);
}

class Resume : public Trainer {
 protected:
  train::TrainOptions resumable(const std::string& precision, const fs::path& dir) const {
    train::TrainOptions o = options(precision);
    o.out_dir = dir.string();
    o.steps = 14;  // not a multiple of the 6 batches per epoch, nor of log_interval 4
    o.log_interval = 4;
    o.eval_interval = 5;
    o.checkpoint_every = 3;
    o.scaler_growth_interval = 3;  // amp-fp16: the scale grows during the run
    return o;
  }
  Finished straight(const std::string& precision) {
    TinyClassifier model(0);
    BlobData data(0);
    Finished f;
    f.result = train::train(model, data, resumable(precision, dir_ / "straight"));
    f.bytes = tensor_bytes(dir_ / "straight" / "model.safetensors");
    return f;
  }
  // Stops after `stop_after` steps, then resumes in fresh objects.
  Finished interrupted(const std::string& precision, int stop_after, const fs::path& dir) {
    {
      TinyClassifier model(0);
      BlobData data(0);
      train::TrainOptions o = resumable(precision, dir);
      int calls = 0;
      o.stop_requested = [&] { return ++calls == stop_after; };
      const train::TrainResult r = train::train(model, data, o);
      EXPECT_TRUE(r.stopped);
      EXPECT_EQ(r.steps, stop_after);
      EXPECT_FALSE(fs::exists(dir / "model.safetensors"));
    }
    return resume(precision, dir);
  }
  Finished resume(const std::string& precision, const fs::path& dir) {
    TinyClassifier model(0);
    BlobData data(0);
    train::TrainOptions o = resumable(precision, dir);
    o.resume = true;
    Finished f;
    f.result = train::train(model, data, o);
    f.bytes = tensor_bytes(dir / "model.safetensors");
    return f;
  }
};

TEST_F(Resume, StoppedHalfwayAndResumedIsBitwiseTheStraightRun) {
  for (const std::string precision : {"fp32", "amp-fp16", "bf16-sr", "fp8"}) {
    SCOPED_TRACE(precision);
    fs::remove_all(dir_);
    const Finished a = straight(precision);
    const Finished b = interrupted(precision, 7, dir_ / "resumed");
    EXPECT_EQ(b.result.resumed_from, 7);
    EXPECT_EQ(a.bytes, b.bytes);
    expect_same_history(a.result, b.result);
    // metrics.jsonl continues: the same lines but for the timings.
    std::istringstream sa(slurp(dir_ / "straight" / "metrics.jsonl")),
        sb(slurp(dir_ / "resumed" / "metrics.jsonl"));
    std::string la, lb;
    int lines = 0;
    while (std::getline(sa, la)) {
      ASSERT_TRUE(std::getline(sb, lb));
      const json ja = json::parse(la), jb = json::parse(lb);
      for (const char* key : {"step", "epoch", "loss", "lr", "scale"}) EXPECT_EQ(ja[key], jb[key]);
      ++lines;
    }
    EXPECT_FALSE(std::getline(sb, lb));
    EXPECT_EQ(lines, 4);
    if (precision == "amp-fp16") {
      // The checkpoint of step 7 caught the scaler mid-growth, and the scale grew after it.
      const io::SafetensorsFile c =
          io::read_safetensors((dir_ / "resumed" / io::checkpoint_file_name(12)).string());
      const json scaler = json::parse(c.metadata.at("scaler"));
      EXPECT_GT(scaler.at("_steps").get<double>(), 0.0);
      EXPECT_NE(a.result.log.front().scale, a.result.log.back().scale);
    }
    if (precision == "fp8") {
      // The amax histories and scales are in the checkpoint: one per step so far.
      const io::SafetensorsFile c =
          io::read_safetensors((dir_ / "resumed" / io::checkpoint_file_name(12)).string());
      EXPECT_EQ(c.tensors.at("fp8/0/0/history").numel(), 12);
      EXPECT_EQ(c.tensors.at("fp8/0/2/meta").numel(), 3);
    }
    if (precision == "bf16-sr") {
      const io::SafetensorsFile c =
          io::read_safetensors((dir_ / "resumed" / io::checkpoint_file_name(12)).string());
      EXPECT_EQ(c.tensors.at("param/fc.weight").dtype(), DType::bf16);
      EXPECT_GT(json::parse(c.metadata.at("optimizers"))[0]["rounding"]["offset"].get<uint64_t>(),
                0u);
    }
  }
}

TEST_F(Resume, TheScalerIsRestoredMidGrowth) {
  // Stopped at step 7 with growth_interval 3: the tracker is 1 (or less after an overflow),
  // and what follows depends on it.
  const Finished a = straight("amp-fp16");
  for (int stop_after : {1, 4, 5, 13}) {
    SCOPED_TRACE(stop_after);
    const fs::path dir = dir_ / std::string("r").append(std::to_string(stop_after));
    const Finished b = interrupted("amp-fp16", stop_after, dir);
    EXPECT_EQ(a.bytes, b.bytes);
    expect_same_history(a.result, b.result);
  }
}

TEST_F(Resume, KeepsTheNewestTwoCheckpoints) {
  (void)straight("fp32");
  const auto all = io::list_checkpoints((dir_ / "straight").string());
  ASSERT_EQ(all.size(), 2u);
  EXPECT_EQ(all[0].first, 12);
  EXPECT_EQ(all[1].first, 9);
  EXPECT_EQ(fs::path(all[0].second).filename(), "checkpoint-00000012.safetensors");
}

TEST_F(Resume, ATornNewestCheckpointIsSkippedForThePreviousOne) {
  const Finished a = straight("amp-fp16");
  const fs::path dir = dir_ / "torn";
  {
    TinyClassifier model(0);
    BlobData data(0);
    train::TrainOptions o = resumable("amp-fp16", dir);
    int calls = 0;
    o.stop_requested = [&] { return ++calls == 8; };  // checkpoints 6 and 8
    ASSERT_TRUE(train::train(model, data, o).stopped);
  }
  // A crash between write and rename: a stray temporary file; and, as if the newest file
  // had been torn by a disk that lied about fsync, a truncated newest checkpoint.
  const fs::path newest = dir / io::checkpoint_file_name(8);
  ASSERT_TRUE(fs::exists(newest));
  ASSERT_TRUE(fs::exists(dir / io::checkpoint_file_name(6)));
  std::ofstream(dir / ".checkpoint-00000011.safetensors.tmp.12345", std::ios::binary)
      << slurp(newest).substr(0, 100);
  fs::resize_file(newest, fs::file_size(newest) / 2);
  std::string messages;
  EXPECT_THROW(io::read_safetensors(newest.string()), Error);
  const auto c = io::read_newest_checkpoint(
      dir.string(), {}, [&](const std::string& why) { messages += why + "\n"; });
  ASSERT_TRUE(c.has_value());
  EXPECT_EQ(c->step, 6);
  EXPECT_NE(messages.find("checkpoint-00000008.safetensors"), std::string::npos) << messages;
  const Finished b = resume("amp-fp16", dir);
  EXPECT_EQ(b.result.resumed_from, 6);
  EXPECT_EQ(a.bytes, b.bytes);
  expect_same_history(a.result, b.result);
}

TEST_F(Resume, ACheckpointOfAnotherModelIsRefused) {
  (void)straight("fp32");
  // The same folder resumed under another preset: every checkpoint fails validation.
  TinyClassifier model(0);
  BlobData data(0);
  train::TrainOptions o = resumable("bf16", dir_ / "straight");
  o.resume = true;
  try {
    train::train(model, data, o);
    ADD_FAILURE() << "expected an error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("no usable checkpoint"), std::string::npos) << e.what();
  }
}

TEST_F(Resume, LanguageModelResumes) {
  auto run = [&](const fs::path& dir, int stop_after, bool resume) {
    Bigram model(4);
    PatternText data;
    train::TrainOptions o = options("amp-bf16");
    o.out_dir = dir.string();
    o.steps = 10;
    o.log_interval = 3;
    o.checkpoint_every = 4;
    o.resume = resume;
    int calls = 0;
    if (stop_after > 0) o.stop_requested = [&, stop_after] { return ++calls == stop_after; };
    train::TrainResult r = train::train(model, data, o);
    return r;
  };
  const train::TrainResult a = run(dir_ / "a", 0, false);
  EXPECT_TRUE(run(dir_ / "b", 5, false).stopped);
  const train::TrainResult b = run(dir_ / "b", 0, true);
  expect_same_history(a, b);
  EXPECT_EQ(tensor_bytes(dir_ / "a" / "model.safetensors"),
            tensor_bytes(dir_ / "b" / "model.safetensors"));
}

TEST_F(Resume, CheckpointsNeedARunFolderAndStatefulData) {
  TinyClassifier model(0);
  BlobData data(0);
  train::TrainOptions o = options();
  o.checkpoint_every = 2;
  o.out_dir.clear();
  EXPECT_THROW(train::train(model, data, o), Error);
  o.out_dir = dir_.string();
  o.keep_checkpoints = 0;
  EXPECT_THROW(train::train(model, data, o), Error);
}

}  // namespace
}  // namespace mixp
