// The trainer on models and data defined here (the built-in ones are tested with the CLI):
// run files, metrics, determinism, presets, language models and compare.
#include "mixp/train/trainer.h"

#include <fcntl.h>
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/file.h>
#include <unistd.h>

#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <limits>
#include <map>

#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <regex>
#include <sstream>

#include "io/write_hook.h"
#include "mixp/autograd.h"
#include "mixp/error.h"
#include "mixp/io/checkpoint.h"
#include "mixp/io/safetensors.h"
#include "mixp/ops.h"
#include "mixp/random.h"
#include "mixp/train/progress.h"
#include "support/scratch.h"
#include "support/tolerance.h"
#include "support/xml_check.h"
#include "train/report.h"

namespace mixp {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;
using test::slurp;

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
    if (training_) training_batches.push_back(x.size(0));
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
  std::vector<int64_t> training_batches;  // the samples of each training forward pass

 private:
  static bool NoGradActive() { return !grad_mode_enabled(); }
  Tensor weight_, bias_, seen_;
  bool training_ = true;
};

// Three Gaussian blobs in 16 dimensions; batches in an order shuffled per epoch from the seed.
class BlobData : public train::DataSource {
 public:
  BlobData(uint64_t seed, int64_t train_n = 96, int64_t test_n = 48, int64_t batch = 16,
           double noise = 0.5)
      : seed_(seed), batch_(batch), noise_(noise) {
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
        xs.push_back((d % 3 == label ? 1.5 : 0.0) + noise_ * double(rng.normal()));
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
  double noise_;
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
    dir_ = test::scratch_path("mixp_train_test_");
    fs::remove_all(dir_);
  }
  void TearDown() override { fs::remove_all(dir_); }
  // Runs into one folder replace each other (overwrite); the folder's rules have tests of their
  // own (RunFolder below).
  train::TrainOptions options(const std::string& precision = "fp32") const {
    return {.model_name = "tiny",
            .precision = precision,
            .epochs = 3,
            .lr = 0.05,
            .out_dir = dir_.string(),
            .overwrite = true,
            .log_interval = 2};
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

  // metrics.jsonl: one valid JSON object per logged step, and one per evaluation after the
  // step it evaluated.
  std::istringstream lines(slurp(dir_ / "metrics.jsonl"));
  std::string line;
  size_t n = 0, evals = 0;
  int64_t last_step = 0;
  while (std::getline(lines, line)) {
    const json j = json::parse(line);
    EXPECT_EQ(j["run_id"], r.run_id);
    if (j["type"] == "eval") {
      ASSERT_LT(evals, r.evals.size());
      EXPECT_EQ(j["step"], r.evals[evals].step);
      EXPECT_EQ(j["step"], last_step) << "an evaluation before the line of its step";
      EXPECT_EQ(j["loss"], r.evals[evals].loss);
      EXPECT_EQ(j["accuracy"], *r.evals[evals].accuracy);
      EXPECT_FALSE(j.contains("bits_per_char"));
      ++evals;
      continue;
    }
    EXPECT_EQ(j["type"], "step");
    for (const char* k : {"step", "epoch", "loss", "lr", "scale", "samples_per_s", "ms",
                          "grad_norm", "grad_norm_max"})
      EXPECT_TRUE(j.contains(k) && j[k].is_number()) << k << " in " << line;
    for (const char* k : {"skipped", "nonfinite", "nonfinite_losses"}) EXPECT_EQ(j[k], 0) << k;
    EXPECT_GT(j["grad_norm"].get<double>(), 0.0);
    EXPECT_GE(j["grad_norm_max"].get<double>(), j["grad_norm"].get<double>());
    ASSERT_LT(n, r.log.size());
    EXPECT_EQ(j["step"], r.log[n].step);
    EXPECT_EQ(j["step"].get<int64_t>(), int64_t(2 * (n + 1)));
    last_step = j["step"].get<int64_t>();
    ++n;
  }
  EXPECT_EQ(n, 9u);
  EXPECT_EQ(n, r.log.size());
  EXPECT_EQ(evals, 3u);  // one per epoch

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
  // fp32 weights and an i64 buffer; nothing in a dtype the run never allocated.
  EXPECT_GE(s["peak_memory_by_dtype_bytes"]["f32"].get<int64_t>(), 4 * (48 + 3));
  EXPECT_GE(s["peak_memory_by_dtype_bytes"]["i64"].get<int64_t>(), 8);
  EXPECT_FALSE(s["peak_memory_by_dtype_bytes"].contains("bf16"));
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
    // The fp32 master of the bf16 weight (3 x 16): its low halves and tie bits.
    EXPECT_EQ(r.peak_memory.at("master"), 2 * 48 + 48 / 8);
    // bf16 moments, two per parameter element (the weight and the fp32 bias).
    EXPECT_EQ(r.optimizer_state, "bf16");
    EXPECT_EQ(r.peak_memory.at("optimizer_state"), 2 * 2 * (48 + 3));
    const io::SafetensorsFile f = io::read_safetensors((dir_ / "model.safetensors").string());
    EXPECT_EQ(f.tensors.at("fc.weight").dtype(), DType::bf16);
    EXPECT_EQ(f.tensors.at("fc.bias").dtype(), DType::f32);  // a norm parameter stays fp32
    EXPECT_EQ(f.metadata.at("precision"), "bf16");
    EXPECT_GT(*r.test_accuracy, 0.9);
  }
  {
    TinyClassifier model(0);
    BlobData data(0);
    train::TrainOptions o = options("bf16");
    o.optimizer_state = "f32";
    const train::TrainResult r = train::train(model, data, o);
    EXPECT_EQ(r.optimizer_state, "f32");
    EXPECT_EQ(r.peak_memory.at("optimizer_state"), 4 * 2 * (48 + 3));
    o.optimizer_state = "f16";
    EXPECT_THROW(train::train(model, data, o), Error);
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

TEST_F(Trainer, GradientAccumulationGivesTheWholeBatchsGradientAndLoss) {
  for (const std::string precision : {"fp32", "amp-bf16", "amp-fp16"}) {
    SCOPED_TRACE(precision);
    // The first step's gradients (before unscaling) and loss, with the batch of 16 whole and
    // in `parts` micro-batches.
    auto first_step = [&](int64_t parts) {
      TinyClassifier model(0);
      BlobData data(0);
      train::TrainOptions o = options(precision);
      o.steps = 1;
      o.log_interval = 1;
      o.grad_accum = parts;
      o.out_dir.clear();
      std::map<std::string, Tensor> grads;
      o.on_gradients = [&](int64_t, const std::vector<std::pair<std::string, Tensor*>>& ps) {
        for (const auto& [name, p] : ps) grads[name] = p->grad().clone();
      };
      const train::TrainResult r = train::train(model, data, o);
      // The step ran its parts (BlobData has no batch_size(), so no memory estimate ran).
      EXPECT_EQ(model.training_batches, std::vector<int64_t>(size_t(parts), 16 / parts));
      return std::make_pair(grads, r.log.front().loss);
    };
    const auto [whole, whole_loss] = first_step(1);
    const DType compute = precision == "amp-fp16"   ? DType::f16
                          : precision == "amp-bf16" ? DType::bf16
                                                    : DType::f32;
    for (const int64_t parts : {int64_t(2), int64_t(4), int64_t(16)}) {
      SCOPED_TRACE(parts);
      const auto [split, split_loss] = first_step(parts);
      // Each part's gradient rounds once in the compute dtype; the parts add in fp32.
      const test::Tolerance tol = test::tolerance(compute, 16 + parts);
      for (const auto& [name, g] : whole)
        EXPECT_EQ(test::compare(split.at(name), g, tol), "") << name;
      EXPECT_NEAR(split_loss, whole_loss, tol.atol + tol.rtol * std::abs(whole_loss));
    }
  }
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

// Two metrics.jsonl files hold the same lines, byte for byte, once the timings and run ids
// (separate runs) are blanked out; both have step and evaluation lines.
void expect_same_metrics_file(const fs::path& a, const fs::path& b) {
  const std::regex varying(R"re("(ms|samples_per_s|run_id)":("[^"]*"|[-+.0-9eE]+))re");
  const std::string blank_a = std::regex_replace(slurp(a), varying, "\"$1\":_");
  const std::string blank_b = std::regex_replace(slurp(b), varying, "\"$1\":_");
  EXPECT_EQ(blank_a, blank_b);
  EXPECT_NE(blank_a.find("\"type\":\"step\""), std::string::npos);
  EXPECT_NE(blank_a.find("\"type\":\"eval\""), std::string::npos);
  EXPECT_NE(blank_a.find("\"ms\":_"), std::string::npos);
}

void expect_same_history(const train::TrainResult& a, const train::TrainResult& b) {
  ASSERT_EQ(a.log.size(), b.log.size());
  for (size_t i = 0; i < a.log.size(); ++i) {
    EXPECT_EQ(a.log[i].step, b.log[i].step);
    // Bit for bit; a window with a non-finite loss is NaN in both.
    const bool both_nan = std::isnan(a.log[i].loss) && std::isnan(b.log[i].loss);
    if (!both_nan) {
      EXPECT_EQ(a.log[i].loss, b.log[i].loss) << "step " << a.log[i].step;
    }
    EXPECT_EQ(a.log[i].grad_norm, b.log[i].grad_norm) << "step " << a.log[i].step;
    EXPECT_EQ(a.log[i].skipped, b.log[i].skipped) << "step " << a.log[i].step;
    EXPECT_EQ(a.log[i].nonfinite, b.log[i].nonfinite) << "step " << a.log[i].step;
    EXPECT_EQ(a.log[i].lr, b.log[i].lr);
    EXPECT_EQ(a.log[i].scale, b.log[i].scale);
  }
  ASSERT_EQ(a.evals.size(), b.evals.size());
  for (size_t i = 0; i < a.evals.size(); ++i) EXPECT_EQ(a.evals[i].loss, b.evals[i].loss);
  EXPECT_EQ(a.skipped_steps, b.skipped_steps);
  EXPECT_EQ(a.final_loss_scale, b.final_loss_scale);
}

// train() with its progress lines into `log`, also when it throws.
train::TrainResult train_logging(train::TrainModel& model, train::DataSource& data,
                                 train::TrainOptions o, std::string& log) {
  char* buffer = nullptr;
  size_t size = 0;
  std::FILE* out = ::open_memstream(&buffer, &size);
  train::ProgressPrinter progress(out, train::Progress::lines);
  o.observer = &progress;
  auto flush = [&] {
    std::fclose(out);
    log.assign(buffer, size);
    std::free(buffer);
  };
  try {
    train::TrainResult r = train::train(model, data, o);
    flush();
    return r;
  } catch (...) {
    flush();
    throw;
  }
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
  for (const std::string precision : {"fp32", "amp-fp16", "bf16", "bf16-sr", "fp8"}) {
    SCOPED_TRACE(precision);
    fs::remove_all(dir_);
    const Finished a = straight(precision);
    const Finished b = interrupted(precision, 7, dir_ / "resumed");
    EXPECT_EQ(b.result.resumed_from, 7);
    EXPECT_EQ(a.bytes, b.bytes);
    expect_same_history(a.result, b.result);
    // metrics.jsonl continues: the same lines but for the timings.
    expect_same_metrics_file(dir_ / "straight" / "metrics.jsonl",
                             dir_ / "resumed" / "metrics.jsonl");
    EXPECT_EQ(b.result.log.size(), 4u);
    if (precision == "amp-fp16") {
      // The checkpoint of step 7 caught the scaler mid-growth, and the scale grew after it.
      const io::Checkpoint c =
          io::read_checkpoint((dir_ / "resumed" / io::checkpoint_file_name(12)).string());
      EXPECT_GT(c.state.get_real("scaler/_steps"), 0.0);
      EXPECT_NE(a.result.log.front().scale, a.result.log.back().scale);
    }
    if (precision == "fp8") {
      // The amax histories and scales are in the checkpoint: one per step so far.
      const io::Checkpoint c =
          io::read_checkpoint((dir_ / "resumed" / io::checkpoint_file_name(12)).string());
      EXPECT_EQ(c.state.tensor("fp8/0/0/history").numel(), 12);
      EXPECT_EQ(c.state.tensor("fp8/0/2/meta").numel(), 3);
    }
    if (precision == "bf16") {
      // The master goes into the file whole, fp32; the moments are bf16.
      const io::Checkpoint c =
          io::read_checkpoint((dir_ / "resumed" / io::checkpoint_file_name(12)).string());
      EXPECT_EQ(c.state.tensor("optimizer.0/master/0").dtype(), DType::f32);
      EXPECT_EQ(c.state.tensor("optimizer.0/exp_avg/0").dtype(), DType::bf16);
      EXPECT_EQ(c.state.get_text("trainer/optimizer_state"), "bf16");
    }
    if (precision == "bf16-sr") {
      const io::Checkpoint c =
          io::read_checkpoint((dir_ / "resumed" / io::checkpoint_file_name(12)).string());
      EXPECT_EQ(c.state.tensor("model/param/fc.weight").dtype(), DType::bf16);
      EXPECT_GT(c.state.get_uint("optimizer.0/rounding.offset"), 0u);
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
    expect_same_metrics_file(dir_ / "straight" / "metrics.jsonl", dir / "metrics.jsonl");
  }
}

TEST_F(Resume, KeepsTheNewestTwoCheckpointsTheLastOfTheFinalState) {
  (void)straight("fp32");
  const auto all = io::list_checkpoints((dir_ / "straight").string());
  ASSERT_EQ(all.size(), 2u);
  EXPECT_EQ(all[0].first, 14);  // the end of the run, so that it can be extended
  EXPECT_EQ(all[1].first, 12);
  EXPECT_EQ(fs::path(all[0].second).filename(), "checkpoint-00000014.safetensors");
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
      dir.string(), "", {}, [&](const std::string& why) { messages += why + "\n"; });
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

TEST_F(Resume, ACheckpointWithOtherMomentsIsRefusedNamingBoth) {
  {
    TinyClassifier model(0);
    BlobData data(0);
    train::TrainOptions o = resumable("bf16", dir_ / "f32-moments");
    o.optimizer_state = "f32";
    train::train(model, data, o);
  }
  TinyClassifier model(0);
  BlobData data(0);
  train::TrainOptions o = resumable("bf16", dir_ / "f32-moments");  // the preset's: bf16
  o.resume = true;
  std::string log;
  EXPECT_THROW(train_logging(model, data, o, log), Error);
  EXPECT_NE(log.find("written with f32 optimizer moments, this run keeps bf16"), std::string::npos)
      << log;
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

// ---- torn writes ------------------------------------------------------------------------------

TEST_F(Resume, ACrashBetweenFsyncAndRenameLeavesThePreviousCheckpointLoadable) {
  // A child process (gtest re-executes this binary) trains and is killed with SIGKILL inside
  // write_file_atomically, once the temporary file of checkpoint 9 is written and fsynced but
  // before its rename: what a power cut at that moment leaves. The folder comes from the
  // environment so that the child writes where the parent looks.
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  if (!std::getenv("MIXP_TORN_TEST_DIR"))
    ::setenv("MIXP_TORN_TEST_DIR", (dir_ / "crashed").c_str(), 1);
  const fs::path dir = std::getenv("MIXP_TORN_TEST_DIR");
  EXPECT_EXIT(
      {
        io::detail::ScopedAtomicWriteHook crash(
            [](const std::string& temp, const std::string& target) {
              if (target.ends_with(io::checkpoint_file_name(9)) && fs::exists(temp))
                ::raise(SIGKILL);
            });
        TinyClassifier model(0);
        BlobData data(0);
        train::train(model, data, resumable("fp32", dir));
      },
      ::testing::KilledBySignal(SIGKILL), "");
  ::unsetenv("MIXP_TORN_TEST_DIR");

  // The stray temporary file holds the whole new checkpoint; the previous two are intact.
  std::vector<std::string> strays;
  for (const auto& e : fs::directory_iterator(dir))
    if (e.path().filename().string().starts_with(".checkpoint-00000009.safetensors.tmp."))
      strays.push_back(e.path().string());
  ASSERT_EQ(strays.size(), 1u);
  const auto all = io::list_checkpoints(dir.string());
  ASSERT_EQ(all.size(), 2u);
  EXPECT_EQ(all[0].first, 6);
  EXPECT_EQ(all[1].first, 3);
  EXPECT_NO_THROW(io::read_safetensors(all[0].second));
  EXPECT_FALSE(fs::exists(dir / "model.safetensors"));

  const Finished a = straight("fp32");
  const Finished b = resume("fp32", dir);
  EXPECT_EQ(b.result.resumed_from, 6);
  EXPECT_EQ(a.bytes, b.bytes);
  expect_same_history(a.result, b.result);
  EXPECT_FALSE(fs::exists(strays[0])) << "the next checkpoint write removes the stray";
}

// Stops a resumable amp-fp16 run in `dir` after step 7 (checkpoints 6 and 7).
void stop_after_seven(const train::TrainOptions& o) {
  TinyClassifier model(0);
  BlobData data(0);
  train::TrainOptions stopping = o;
  int calls = 0;
  stopping.stop_requested = [&] { return ++calls == 7; };
  ASSERT_TRUE(train::train(model, data, stopping).stopped);
}

TEST_F(Resume, ACorruptTensorIsFoundByItsChecksumAndTheCheckpointSkipped) {
  const Finished a = straight("amp-fp16");
  // Every way of changing a tensor's bytes with the header intact: zeroed, one huge but
  // finite value, one flipped bit.
  const std::vector<std::pair<std::string, std::function<void(std::vector<double>&)>>> damage = {
      {"zeroed", [](std::vector<double>& w) { std::fill(w.begin(), w.end(), 0.0); }},
      {"3e38", [](std::vector<double>& w) { w[5] = 3e38; }},
      {"nudged", [](std::vector<double>& w) { w[0] = std::nextafter(float(w[0]), 1.0f); }}};
  for (const auto& [what, change] : damage) {
    SCOPED_TRACE(what);
    const fs::path dir = dir_ / what;
    train::TrainOptions o = resumable("amp-fp16", dir);
    stop_after_seven(o);
    // Checkpoint 7 rewritten with one tensor changed, its header and checksums as they were.
    const std::string newest = (dir / io::checkpoint_file_name(7)).string();
    io::SafetensorsFile f = io::read_safetensors(newest);
    std::vector<double> w = f.tensors.at("model/param/fc.weight").to_vector();
    change(w);
    f.tensors["model/param/fc.weight"] = from_values(w, {3, 16});
    std::vector<std::pair<std::string, Tensor>> tensors(f.tensors.begin(), f.tensors.end());
    io::write_safetensors(newest, tensors, f.metadata);
    EXPECT_THROW(io::read_checkpoint(newest), Error);
    TinyClassifier model(0);
    BlobData data(0);
    o.resume = true;
    std::string log;
    const train::TrainResult r = train_logging(model, data, o, log);
    EXPECT_EQ(r.resumed_from, 6);
    EXPECT_NE(log.find("skipping " + newest), std::string::npos) << log;
    EXPECT_NE(log.find("tensor 'model/param/fc.weight' is corrupt"), std::string::npos) << log;
    EXPECT_EQ(a.bytes, tensor_bytes(dir / "model.safetensors"));
  }
}

TEST_F(Resume, ACheckpointHoldingNaNIsSkippedNamingTheTensor) {
  const Finished a = straight("amp-fp16");
  const fs::path dir = dir_ / "nan";
  train::TrainOptions o = resumable("amp-fp16", dir);
  stop_after_seven(o);
  // Checkpoint 7 written again, checksums and all, with one NaN weight: what a run that
  // checkpointed a poisoned state would have written.
  const std::string newest = (dir / io::checkpoint_file_name(7)).string();
  io::Checkpoint c = io::read_checkpoint(newest);
  std::vector<double> w = c.state.tensor("model/param/fc.weight").to_vector();
  w[5] = std::nan("");
  c.state.tensors["model/param/fc.weight"] = from_values(w, {3, 16});
  io::write_checkpoint(dir.string(), 7, c.run_id, c.state,
                       {{"config", c.file.metadata.at("config")}},
                       /*keep=*/2);
  TinyClassifier model(0);
  BlobData data(0);
  o.resume = true;
  std::string log;
  const train::TrainResult r = train_logging(model, data, o, log);
  EXPECT_EQ(r.resumed_from, 6);
  EXPECT_NE(log.find("skipping " + newest), std::string::npos) << log;
  EXPECT_NE(log.find("tensor 'model/param/fc.weight' holds nan at element 5"), std::string::npos)
      << log;
  EXPECT_EQ(a.bytes, tensor_bytes(dir / "model.safetensors"));
}

// ---- non-finite steps ---------------------------------------------------------------------------

// BlobData whose batch at (epoch, position) holds NaN pixels: non-finite data, at a place that
// follows the loader's state, so that a resumed run meets it where the straight run did.
class PoisonedBlobs : public train::DataSource {
 public:
  PoisonedBlobs(int64_t epoch, int64_t position) : epoch_(epoch), position_(position) {}
  std::optional<data::Batch> next_train() override {
    const data::LoaderState at = *inner_.loader_state();
    std::optional<data::Batch> b = inner_.next_train();
    if (b && at.epoch == epoch_ && at.position == position_) {
      std::vector<double> x = b->x.to_vector();
      x[3] = std::nan("");
      b->x = from_values(x, b->x.shape());
    }
    return b;
  }
  int64_t batches_per_epoch() const override { return inner_.batches_per_epoch(); }
  void for_each_eval_batch(const std::function<void(const data::Batch&)>& visit) override {
    inner_.for_each_eval_batch(visit);
  }
  std::optional<data::LoaderState> loader_state() const override { return inner_.loader_state(); }
  void set_loader_state(const data::LoaderState& s) override { inner_.set_loader_state(s); }

 private:
  BlobData inner_{0};
  int64_t epoch_, position_;
};

class NonFinite : public Trainer {
 protected:
  train::TrainOptions run_options(const std::string& precision, const fs::path& dir) const {
    train::TrainOptions o = options(precision);
    o.out_dir = dir.string();
    o.steps = 12;
    o.checkpoint_every = 4;
    o.limits.max_skipped_fraction = 0.1;  // one dropped batch of 12 is within it
    return o;
  }
};

TEST_F(NonFinite, NaNDataWithoutAScalerStopsNamingTheStepAndKeepsTheLastGoodState) {
  for (const std::string precision : {"fp32", "bf16"}) {
    SCOPED_TRACE(precision);
    const fs::path dir = dir_ / precision;
    // The batch of step 6: epoch 0, the sixth of 16 samples.
    std::string message;
    {
      TinyClassifier model(0);
      PoisonedBlobs data(0, 5 * 16);
      try {
        train::train(model, data, run_options(precision, dir));
        ADD_FAILURE() << "expected an error";
      } catch (const Error& e) {
        message = e.message();
      }
    }
    EXPECT_NE(message.find("step 6: the loss is nan"), std::string::npos) << message;
    EXPECT_NE(message.find("the gradient of 'fc.weight' holds nan"), std::string::npos) << message;
    EXPECT_NE(message.find(precision), std::string::npos) << message;
    EXPECT_NE(message.find(io::checkpoint_file_name(5)), std::string::npos) << message;
    // The checkpoint of step 5 is the last good state: no checkpoint holds a NaN.
    const auto all = io::list_checkpoints(dir.string());
    ASSERT_EQ(all.size(), 2u);
    EXPECT_EQ(all[0].first, 5);
    EXPECT_EQ(all[1].first, 4);
    for (const auto& [step, path] : all)
      EXPECT_FALSE(io::find_nonfinite(io::read_safetensors(path)));
    EXPECT_FALSE(fs::exists(dir / "model.safetensors"));

    // Resumed from it with skip, the run is bitwise one that skipped from the start.
    train::TrainResult skipped_straight, resumed;
    {
      TinyClassifier model(0);
      PoisonedBlobs data(0, 5 * 16);
      train::TrainOptions o = run_options(precision, dir_ / (precision + "-skip"));
      o.on_nonfinite = train::OnNonFinite::skip;
      skipped_straight = train::train(model, data, o);
    }
    {
      TinyClassifier model(0);
      PoisonedBlobs data(0, 5 * 16);
      train::TrainOptions o = run_options(precision, dir);
      o.on_nonfinite = train::OnNonFinite::skip;
      o.resume = true;
      resumed = train::train(model, data, o);
    }
    EXPECT_EQ(resumed.resumed_from, 5);
    EXPECT_EQ(skipped_straight.steps, 12);
    EXPECT_EQ(skipped_straight.skipped_steps, 1);
    EXPECT_EQ(skipped_straight.nonfinite_steps, 1);
    EXPECT_EQ(resumed.skipped_steps, 1);
    EXPECT_EQ(tensor_bytes(dir / "model.safetensors"),
              tensor_bytes(dir_ / (precision + "-skip") / "model.safetensors"));
    expect_same_history(skipped_straight, resumed);
    expect_same_metrics_file(dir / "metrics.jsonl", dir_ / (precision + "-skip") / "metrics.jsonl");
    // The window of step 6 (steps 5 and 6, log_interval 2) is marked, not averaged away.
    for (const train::StepMetrics& m : skipped_straight.log) {
      EXPECT_EQ(std::isfinite(m.loss), m.step != 6) << m.step;
      EXPECT_EQ(m.nonfinite_losses, m.step == 6 ? 1 : 0) << m.step;
      EXPECT_EQ(m.skipped, m.step == 6 ? 1 : 0) << m.step;
    }
    const json summary = json::parse(slurp(dir_ / (precision + "-skip") / "summary.json"));
    EXPECT_EQ(summary["skipped_steps"], 1);
    EXPECT_EQ(summary["nonfinite_skipped_steps"], 1);
  }
}

TEST_F(NonFinite, AnInfiniteGradientWithAFiniteLossIsNamedByParameterAndElement) {
  TinyClassifier model(0);
  BlobData data(0);
  train::TrainOptions o = options("amp-bf16");
  o.steps = 6;
  o.on_gradients = [](int64_t step, const std::vector<std::pair<std::string, Tensor*>>& p) {
    if (step != 3) return;
    Tensor g = p[1].second->grad();  // fc.bias
    g.data<float>()[2] = -std::numeric_limits<float>::infinity();
  };
  try {
    train::train(model, data, o);
    ADD_FAILURE() << "expected an error";
  } catch (const Error& e) {
    const std::string m = e.message();
    EXPECT_NE(m.find("step 3: the loss is "), std::string::npos) << m;
    EXPECT_EQ(m.find("the loss is nan"), std::string::npos) << m;
    EXPECT_NE(m.find("the gradient of 'fc.bias' holds -inf at element 2"), std::string::npos) << m;
    EXPECT_NE(m.find("no checkpoint was written"), std::string::npos) << m;
  }
}

// Known gradients (every element of step s's gradient is s / 100, so its total norm is
// s / 100 * sqrt(51)), an infinite one at step 3 and a NaN batch at step 6: each window's line
// holds its mean and largest finite norm and counts its skipped and non-finite steps.
TEST_F(NonFinite, MetricsWindowsHoldTheirGradientNormsAndNonFiniteSteps) {
  TinyClassifier model(0);
  PoisonedBlobs data(0, 5 * 16);
  train::TrainOptions o = run_options("fp32", dir_);
  o.on_nonfinite = train::OnNonFinite::skip;
  o.limits.max_skipped_fraction = 0.2;
  o.on_gradients = [](int64_t step, const std::vector<std::pair<std::string, Tensor*>>& p) {
    if (step == 6) return;  // the NaN batch's own gradients
    for (const auto& [name, parameter] : p) {
      Tensor g = parameter->grad();
      for (int64_t i = 0; i < g.numel(); ++i) g.data<float>()[i] = float(step) / 100.0f;
    }
    if (step == 3) p[1].second->grad().data<float>()[0] = std::numeric_limits<float>::infinity();
  };
  const train::TrainResult r = train::train(model, data, o);
  ASSERT_EQ(r.log.size(), 6u);
  const test::Tolerance tol = test::tolerance(DType::f32, 51);
  auto norm = [](int64_t step) { return double(float(step) / 100.0f) * std::sqrt(51.0); };
  auto expect_near = [&](const std::optional<double>& got, double want, int64_t step) {
    ASSERT_TRUE(got.has_value()) << step;
    EXPECT_NEAR(*got, want, tol.atol + tol.rtol * want) << step;
  };
  expect_near(r.log[0].grad_norm, (norm(1) + norm(2)) / 2, 2);
  expect_near(r.log[0].grad_norm_max, norm(2), 2);
  expect_near(r.log[1].grad_norm, norm(4), 4);  // step 3's is infinite
  expect_near(r.log[2].grad_norm, norm(5), 6);  // step 6's is NaN
  expect_near(r.log[5].grad_norm_max, norm(12), 12);
  const int64_t skipped[] = {0, 1, 1, 0, 0, 0}, nonfinite_losses[] = {0, 0, 1, 0, 0, 0};
  for (size_t i = 0; i < r.log.size(); ++i) {
    SCOPED_TRACE(r.log[i].step);
    EXPECT_EQ(r.log[i].skipped, skipped[i]);
    EXPECT_EQ(r.log[i].nonfinite, skipped[i]);
    EXPECT_EQ(r.log[i].nonfinite_losses, nonfinite_losses[i]);
    EXPECT_EQ(std::isfinite(r.log[i].loss), nonfinite_losses[i] == 0);
  }
  // In the file: the NaN window's loss is null, and the lines read back as they were.
  std::istringstream lines(slurp(dir_ / "metrics.jsonl"));
  size_t n = 0;
  for (std::string line; std::getline(lines, line);) {
    const json j = json::parse(line);
    if (j["type"] != "step") continue;
    ASSERT_LT(n, r.log.size());
    EXPECT_EQ(j["loss"].is_null(), r.log[n].step == 6) << line;
    EXPECT_EQ(j["skipped"], r.log[n].skipped) << line;
    EXPECT_EQ(j["grad_norm"], *r.log[n].grad_norm) << line;
    ++n;
  }
  EXPECT_EQ(n, r.log.size());
  // loss.svg marks both windows that skipped a step and the one with a NaN loss, and has a
  // marker per evaluation.
  const std::string svg = slurp(dir_ / "loss.svg");
  ASSERT_TRUE(test::check_xml(svg).ok);
  auto count = [&](const std::string& what) {
    size_t c = 0;
    for (size_t at = svg.find(what); at != std::string::npos; at = svg.find(what, at + 1)) ++c;
    return c;
  };
  EXPECT_EQ(count("<rect class=\"skipped-steps\""), 2u);
  EXPECT_EQ(count("<rect class=\"nonfinite-loss\""), 1u);
  EXPECT_EQ(count("<circle class=\"marker\""), r.evals.size());
  EXPECT_GE(r.evals.size(), 2u);
}

TEST_F(NonFinite, WithAScalerNaNDataIsASkippedStepNotAnError) {
  TinyClassifier model(0);
  PoisonedBlobs data(0, 5 * 16);
  train::TrainOptions o = run_options("amp-fp16", dir_);
  const train::TrainResult r = train::train(model, data, o);
  EXPECT_EQ(r.steps, 12);
  EXPECT_EQ(r.skipped_steps, 1);
  EXPECT_EQ(r.nonfinite_steps, 0);  // the scaler's skip, not on_nonfinite's
  EXPECT_EQ(r.final_loss_scale, 32768.0);
}

// NaN/Inf storms: non-finite gradients in 1% of the steps of an amp-fp16 run. The scaler skips
// exactly those steps (the weights do not move), the run finishes and the accuracy stays
// within half a point of a clean run's.
TEST_F(NonFinite, AStormOfNonFiniteGradientsInOnePercentOfStepsCostsNoAccuracy) {
  constexpr int64_t kSteps = 300, kEvery = 100;
  struct Outcome {
    train::TrainResult result;
    int injected = 0, unchanged = 0;
  };
  auto run = [&](bool storm) {
    TinyClassifier model(0);
    // Few epochs (an evaluation ends each), and a test set where a sample is 0.05 points.
    BlobData data(0, /*train_n=*/4096, /*test_n=*/2000, /*batch=*/32, /*noise=*/2.0);
    train::TrainOptions o = options("amp-fp16");
    o.out_dir.clear();
    o.steps = kSteps;
    o.lr = 0.02;
    Outcome out;
    std::vector<double> before;  // the weights when a storm step's gradients were poisoned
    o.on_gradients = [&](int64_t step, const std::vector<std::pair<std::string, Tensor*>>& p) {
      const std::vector<double> now = p[0].second->to_vector();
      if (!before.empty()) {
        out.unchanged += now == before;  // the update of the poisoned step was skipped
        before.clear();
      }
      if (!storm || step % kEvery != kEvery / 2) return;
      Tensor g = p[0].second->grad();
      g.data<float>()[step % 48] = out.injected % 2 ? std::numeric_limits<float>::infinity()
                                                    : std::numeric_limits<float>::quiet_NaN();
      ++out.injected;
      before = now;
    };
    out.result = train::train(model, data, o);
    return out;
  };
  const Outcome clean = run(false), storm = run(true);
  EXPECT_EQ(storm.injected, int(kSteps / kEvery));
  EXPECT_EQ(storm.unchanged, storm.injected);
  EXPECT_EQ(clean.result.skipped_steps, 0);
  EXPECT_EQ(storm.result.skipped_steps, storm.injected);
  EXPECT_EQ(storm.result.steps, kSteps);
  EXPECT_EQ(storm.result.final_loss_scale, 65536.0 / double(1 << storm.injected));
  ASSERT_TRUE(clean.result.test_accuracy && storm.result.test_accuracy);
  // A task hard enough that accuracy is not saturated: the bound means something.
  EXPECT_LT(*clean.result.test_accuracy, 0.97);
  EXPECT_GT(*clean.result.test_accuracy, 0.6);
  EXPECT_LE(std::abs(*storm.result.test_accuracy - *clean.result.test_accuracy), 0.005);
  std::printf("accuracy: clean %.4f, storm %.4f (%d steps of %lld skipped)\n",
              *clean.result.test_accuracy, *storm.result.test_accuracy, storm.injected,
              (long long)kSteps);
}

// ---- divergence --------------------------------------------------------------------------------

// amp-fp16 with every gradient poisoned from step `from` on: every later step is skipped.
train::TrainResult poisoned_from(int64_t from, train::TrainOptions o) {
  TinyClassifier model(0);
  BlobData data(0);
  o.steps = 60;
  o.checkpoint_every = 2;
  o.on_gradients = [from](int64_t step, const std::vector<std::pair<std::string, Tensor*>>& p) {
    if (step < from) return;
    Tensor g = p[1].second->grad();
    g.fill_(std::numeric_limits<double>::infinity());
  };
  return train::train(model, data, o);
}

TEST_F(Trainer, SkippedStepsInARowStopTheRunNamingTheOverflowingTensor) {
  train::TrainOptions o = options("amp-fp16");
  o.limits.min_loss_scale = 0;  // only the count of skipped steps
  try {
    poisoned_from(5, o);
    FAIL() << "a run that skipped every step finished";
  } catch (const Error& e) {
    const std::string m = e.message();
    EXPECT_NE(m.find("the run diverged at step 30: 26 steps in a row were skipped, more than the "
                     "limit of 25"),
              std::string::npos)
        << m;
    EXPECT_NE(m.find("at step 5, the gradient of 'fc.bias' holds inf at element 0"),
              std::string::npos)
        << m;
    EXPECT_NE(m.find(io::checkpoint_file_name(4) + ", is kept"), std::string::npos) << m;
  }
  EXPECT_FALSE(fs::exists(dir_ / "model.safetensors"));
  EXPECT_FALSE(fs::exists(dir_ / "summary.json"));
  EXPECT_EQ(io::list_checkpoints(dir_.string()).front().first, 4) << "a skipped step was saved";
}

TEST_F(Trainer, ALossScaleBelowTheFloorStopsTheRun) {
  train::TrainOptions o = options("amp-fp16");
  o.limits.max_skipped_in_a_row = 0;  // only the floor
  o.limits.min_loss_scale = 1.0;
  try {
    poisoned_from(3, o);
    FAIL() << "the scale fell below its floor and the run went on";
  } catch (const Error& e) {
    // 2^16 halves to 2^-1 in 17 skipped steps, 3 to 19.
    EXPECT_NE(e.message().find("the run diverged at step 19: the loss scale fell to 0.5, below "
                               "the floor of 1"),
              std::string::npos)
        << e.message();
  }
  // Both limits off: the run finishes, every later step skipped.
  o.limits.min_loss_scale = 0;
  const train::TrainResult r = poisoned_from(3, o);
  EXPECT_EQ(r.skipped_steps, 58);
}

TEST_F(Trainer, ARunFolderHoldsOneRunUnderALock) {
  train::TrainOptions o = options();
  o.overwrite = false;
  {
    TinyClassifier model(0);
    BlobData data(0);
    train::train(model, data, o);
  }
  const std::string first = slurp(dir_ / "run.json");
  TinyClassifier model(0);
  BlobData data(0);
  try {
    train::train(model, data, o);
    FAIL() << "a second run went into the folder of the first";
  } catch (const Error& e) {
    EXPECT_NE(e.message().find("holds another run's files (checkpoint-00000018.safetensors, "
                               "loss.svg, metrics.jsonl, model.safetensors, run.json, "
                               "summary.json)"),
              std::string::npos)
        << e.message();
  }
  EXPECT_EQ(slurp(dir_ / "run.json"), first);
  // Held by another process (here: another open file of this one), the folder is refused.
  const int fd = ::open((dir_ / ".lock").c_str(), O_RDWR);
  ASSERT_GE(fd, 0);
  ASSERT_EQ(::flock(fd, LOCK_EX | LOCK_NB), 0);
  o.overwrite = true;
  try {
    train::train(model, data, o);
    FAIL() << "a locked folder was used";
  } catch (const Error& e) {
    EXPECT_NE(e.message().find("is in use by process " + std::to_string(::getpid())),
              std::string::npos)
        << e.message();
  }
  ::close(fd);
  EXPECT_EQ(slurp(dir_ / "run.json"), first);
  const train::TrainResult r = train::train(model, data, o);  // overwrite, once unlocked
  EXPECT_NE(slurp(dir_ / "run.json"), first);
  EXPECT_NE(slurp(dir_ / "run.json").find(r.run_id), std::string::npos);
}

// metrics.jsonl read back: step lines with and without "type" (older files), evaluation lines,
// and a last line cut short by a killed run, which is left out; a bad line elsewhere is named.
TEST_F(Trainer, MetricsFilesOfEveryVersionReadBack) {
  const std::string old_line =
      R"({"step":2,"epoch":0,"loss":1.5,"lr":0.1,"scale":1,"samples_per_s":9,"ms":3})";
  const std::string step_line = train::metrics_json({.step = 4,
                                                     .epoch = 0,
                                                     .loss = NAN,
                                                     .lr = 0.1,
                                                     .scale = 2,
                                                     .samples_per_s = 9,
                                                     .ms = 3,
                                                     .grad_norm = 0.5,
                                                     .grad_norm_max = 0.75,
                                                     .skipped = 1,
                                                     .nonfinite = 1,
                                                     .nonfinite_losses = 1},
                                                    "id");
  const std::string eval_line = train::metrics_json(
      train::EvalMetrics{.step = 4, .loss = 0.5, .accuracy = 0.25, .bits_per_char = {}}, "id");
  fs::create_directories(dir_);
  const fs::path file = dir_ / "metrics.jsonl";
  std::ofstream(file) << old_line << "\n" << step_line << "\n" << eval_line << "\n{\"step\":6,\"ep";
  const train::MetricsFile m = train::read_metrics(file.string());
  ASSERT_EQ(m.log.size(), 2u);
  EXPECT_EQ(m.log[0].step, 2);
  EXPECT_EQ(m.log[0].loss, 1.5);
  EXPECT_FALSE(m.log[0].grad_norm.has_value());  // older lines record none
  EXPECT_EQ(m.log[0].skipped, 0);
  EXPECT_TRUE(std::isnan(m.log[1].loss));
  EXPECT_EQ(m.log[1].grad_norm, 0.5);
  EXPECT_EQ(m.log[1].grad_norm_max, 0.75);
  EXPECT_EQ(m.log[1].skipped, 1);
  EXPECT_EQ(m.log[1].nonfinite_losses, 1);
  ASSERT_EQ(m.evals.size(), 1u);
  EXPECT_EQ(m.evals[0].accuracy, 0.25);
  EXPECT_FALSE(m.evals[0].bits_per_char.has_value());
  std::ofstream(file) << old_line << "\n{\"step\":\n" << eval_line << "\n";
  try {
    train::read_metrics(file.string());
    ADD_FAILURE() << "expected an error";
  } catch (const Error& e) {
    EXPECT_NE(e.message().find("metrics.jsonl line 2 does not read"), std::string::npos)
        << e.message();
  }
}

TEST(OnNonFinite, NamesRoundTrip) {
  for (const auto p : {train::OnNonFinite::stop, train::OnNonFinite::skip})
    EXPECT_EQ(train::parse_on_nonfinite(train::name_of(p)), p);
  EXPECT_THROW(train::parse_on_nonfinite("ignore"), Error);
}

}  // namespace
}  // namespace mixp
