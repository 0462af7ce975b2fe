// Sampling (mixp/train/sample.h): the draw (determinism, top-k, greedy, frequencies), the next
// token's logits cached and uncached, within and past the context, and the errors.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <map>
#include <string>
#include <vector>

#include "mixp/error.h"
#include "mixp/io/checkpoint.h"
#include "mixp/io/safetensors.h"
#include "mixp/nn/models.h"
#include "mixp/ops.h"
#include "mixp/train/run.h"
#include "mixp/train/sample.h"
#include "mixp/train/trained_model.h"
#include "support/scratch.h"
#include "support/tolerance.h"

namespace mixp::train {
namespace {

const std::string kVocabulary = "abcdefghij .\n";  // 13 characters

nn::ModelConfig tiny(const std::string& name) {
  return nn::ModelConfig{
      .name = name, .vocab = 13, .layers = 2, .heads = 2, .width = 32, .context = 16};
}

std::string error_of(const std::function<void()>& f) {
  try {
    f();
  } catch (const Error& e) {
    return e.message();
  }
  return "(no error)";
}

TEST(Sample, TheDrawIsAFunctionOfTheGeneratorState) {
  const std::vector<float> logits = {0.1f, 1.5f, -0.3f, 0.9f, 0.0f};
  for (uint64_t seed = 0; seed < 20; ++seed) {
    Philox a(PhiloxState{.seed = seed, .stream = kSampleStream}), b = a;
    EXPECT_EQ(draw_token(logits, 1.0, 0, a), draw_token(logits, 1.0, 0, b));
    EXPECT_EQ(a.state(), b.state());
    EXPECT_EQ(a.state().offset, 2u) << "a draw takes two words";
  }
}

// Logits drawn from a few integers, so that many have ties; greedy is the first largest.
TEST(Sample, TopKOneIsTheFirstLargestLogit) {
  Philox values(PhiloxState{.seed = 4});
  for (uint64_t seed = 0; seed < 200; ++seed) {
    std::vector<float> logits;
    for (int i = 0; i < 7; ++i) logits.push_back(float(values.next_u32() % 4) - 1.5f);
    const auto first_largest = std::max_element(logits.begin(), logits.end()) - logits.begin();
    Philox rng(PhiloxState{.seed = seed});
    for (const double temperature : {0.1, 1.0, 10.0})
      EXPECT_EQ(draw_token(logits, temperature, 1, rng), first_largest);
  }
}

// Frequencies of 40000 draws: each within 5 binomial standard deviations of n p, p the softmax
// of logit / temperature over the top-k candidates (zero for the others).
TEST(Sample, DrawsFollowTheSoftmaxOfTheCandidates) {
  const std::vector<float> logits = {1.0f, -0.5f, 0.25f, 2.0f, 0.25f, -3.0f};
  const int64_t n = 40000;
  for (const auto& [temperature, top_k] :
       std::vector<std::pair<double, int64_t>>{{1.0, 0}, {0.5, 0}, {2.0, 3}, {1.0, 4}}) {
    SCOPED_TRACE("temperature " + std::to_string(temperature) + " top-k " + std::to_string(top_k));
    // Token i is a candidate when fewer than k tokens come before it: a larger logit, or an
    // equal one at a lower index.
    std::vector<bool> kept(logits.size(), true);
    for (size_t i = 0; i < logits.size() && top_k > 0; ++i) {
      int64_t before = 0;
      for (size_t j = 0; j < logits.size(); ++j)
        before += logits[j] > logits[i] || (logits[j] == logits[i] && j < i);
      kept[i] = before < top_k;
    }
    std::vector<double> p(logits.size(), 0.0);
    double total = 0;
    for (size_t i = 0; i < logits.size(); ++i)
      if (kept[i]) total += p[i] = std::exp(logits[i] / temperature);
    std::vector<int64_t> counts(logits.size(), 0);
    Philox rng(PhiloxState{.seed = 9, .stream = kSampleStream});
    for (int64_t i = 0; i < n; ++i) ++counts[size_t(draw_token(logits, temperature, top_k, rng))];
    for (size_t i = 0; i < logits.size(); ++i) {
      const double want = double(n) * p[i] / total;
      EXPECT_NEAR(double(counts[i]), want, 5 * std::sqrt(want * (1 - p[i] / total)) + 1e-9)
          << "token " << i;
    }
  }
}

TEST(Sample, BadOptionsNameTheFlagAndValue) {
  auto bad = [](SampleOptions o) { return error_of([&] { validate_sample_options(o); }); };
  EXPECT_EQ(bad({.tokens = 0}), "--tokens must be at least 1, got 0");
  EXPECT_EQ(bad({.temperature = 0}), "--temperature must be a finite number above 0, got 0");
  EXPECT_EQ(bad({.temperature = -1}), "--temperature must be a finite number above 0, got -1");
  EXPECT_EQ(bad({.temperature = INFINITY}),
            "--temperature must be a finite number above 0, got inf");
  EXPECT_EQ(bad({.top_k = -2}), "--top-k must be 0 (every token) or more, got -2");
  EXPECT_EQ(bad({.prompt = ""}), "--prompt must hold at least one character");
  EXPECT_EQ(bad({}), "(no error)");
}

TEST(Sample, APromptCharacterOutsideTheVocabularyIsNamed) {
  EXPECT_EQ(encode_text("ab c", kVocabulary), (std::vector<int64_t>{0, 1, 10, 2}));
  EXPECT_EQ(error_of([] { (void)encode_text("abXc", kVocabulary); }),
            "the prompt's character 'X' at position 2 is not in the model's vocabulary of 13 "
            "characters");
  EXPECT_EQ(error_of([] { (void)encode_text("a\tb", kVocabulary); }),
            "the prompt's character '\\t' at position 1 is not in the model's vocabulary of 13 "
            "characters");
  const std::vector<float> nan_logits = {0.0f, NAN};
  Philox rng;
  EXPECT_NE(error_of([&] { (void)draw_token(nan_logits, 1.0, 0, rng); }).find("logit of token 1"),
            std::string::npos);
  auto mlp = nn::make_model(nn::ModelConfig{.name = "mlp"}, 0);
  EXPECT_EQ(error_of([&] { NextTokenLogits next(*mlp, true); }),
            "model mlp is not a text model: sampling needs gpt or lstm");
}

TEST(Sample, TheSameSeedGivesTheSameTextAndAnotherSeedAnother) {
  for (const char* name : {"gpt", "lstm"}) {
    SCOPED_TRACE(name);
    auto model = nn::make_model(tiny(name), 1);
    model->train(false);
    Inference inference(*model, "fp32");
    auto text = [&](uint64_t seed) {
      return sample(*model, kVocabulary, inference, {.prompt = "abc", .tokens = 40, .seed = seed});
    };
    const std::string first = text(1);
    EXPECT_EQ(first.size(), 43u);
    EXPECT_TRUE(first.starts_with("abc"));
    EXPECT_EQ(text(1), first);
    EXPECT_NE(text(2), first);
  }
}

// The logits of the token after each prefix x[0, L) of a sequence: cached against uncached while
// L <= context, and past it against the full forward of the window the header documents.
TEST(Sample, CachedLogitsAreTheForwardOfTheDocumentedWindow) {
  for (const char* name : {"gpt", "lstm"}) {
    SCOPED_TRACE(name);
    const nn::ModelConfig c = tiny(name);
    auto model = nn::make_model(c, 2);
    model->train(false);
    NextTokenLogits cached(*model, true), uncached(*model, false);
    const int64_t keep = c.context / 2, length = 3 * c.context + 5, prompt = 4;
    // The lstm's window outgrows its forward's context: the same weights (an lstm has none of
    // the context's size) in a model that reads the whole sequence at once.
    nn::ModelConfig whole = c;
    whole.context = length;
    auto reference = nn::make_model(whole, 2);
    reference->train(false);
    Philox rng(PhiloxState{.seed = 3});
    std::vector<int64_t> x;
    for (int64_t i = 0; i < length; ++i) x.push_back(int64_t(rng.next_u32() % uint32_t(c.vocab)));
    cached.append(std::span(x).first(size_t(prompt)));
    uncached.append(std::span(x).first(size_t(prompt)));
    const test::Tolerance tol = test::tolerance(DType::f32, 4 * c.width);
    for (int64_t l = prompt; l <= length; ++l) {
      SCOPED_TRACE("L = " + std::to_string(l));
      if (l > prompt) {
        cached.append(std::span(x).subspan(size_t(l - 1), 1));
        uncached.append(std::span(x).subspan(size_t(l - 1), 1));
      }
      const std::vector<float> got = cached.logits(), full = uncached.logits();
      // The window of the header: from 0 within the context (the lstm: always); past it, keep
      // tokens at each restart, one more per token, restarting when it would exceed context.
      int64_t begin = 0;
      if (c.name == "gpt" && l > c.context)
        begin = l - (keep + (l - c.context - 1) % (c.context - keep + 1));
      ASSERT_EQ(cached.window(), std::make_pair(begin, l));
      ASSERT_EQ(uncached.window(), std::make_pair(std::max<int64_t>(0, l - c.context), l));
      std::vector<double> window(x.begin() + begin, x.begin() + l);
      std::vector<float> want = full;
      if (begin != uncached.window().first) {
        nn::Model& m = c.name == "lstm" ? *reference : *model;
        const Tensor logits =
            m.forward(from_values(window, Shape{1, int64_t(window.size())}, DType::i64));
        const std::vector<double> last = logits.slice(0, 1).reshape({-1, c.vocab}).to_vector();
        want.assign(last.end() - c.vocab, last.end());
      }
      const std::vector<double> got_d(got.begin(), got.end()), want_d(want.begin(), want.end());
      ASSERT_EQ(test::compare(from_values(got_d, Shape{c.vocab}),
                              from_values(want_d, Shape{c.vocab}), tol),
                "");
    }
  }
}

// Within the context the cache changes nothing but the order of sums, under the presets whose
// attention is not FP8: the logits of the two paths within the tolerance of the compute dtype.
TEST(Sample, CachedAndUncachedLogitsAgreeUnderThePresets) {
  for (const char* precision : {"fp32", "amp-bf16", "bf16", "amp-fp16", "fp16"}) {
    SCOPED_TRACE(precision);
    const nn::ModelConfig c = tiny("gpt");
    auto model = nn::make_model(c, 8);
    model->train(false);
    Inference inference(*model, precision);
    inference.cast_parameters();
    const DType compute = inference.preset().compute_dtype.value_or(DType::f32);
    NextTokenLogits cached(*model, true), uncached(*model, false);
    Philox rng(PhiloxState{.seed = 6});
    for (int64_t l = 1; l <= c.context; ++l) {
      const int64_t token[] = {int64_t(rng.next_u32() % uint32_t(c.vocab))};
      cached.append(token);
      uncached.append(token);
      std::vector<float> got, want;
      inference.run([&] {
        got = cached.logits();
        want = uncached.logits();
      });
      const std::vector<double> g(got.begin(), got.end()), w(want.begin(), want.end());
      ASSERT_EQ(test::compare(from_values(g, Shape{c.vocab}), from_values(w, Shape{c.vocab}),
                              test::tolerance(compute, 4 * c.width)),
                "")
          << "L = " << l;
    }
  }
}

TEST(Sample, RunsInEvaluationModeAndRestoresTheModelsMode) {
  nn::ModelConfig c = tiny("gpt");
  c.dropout = 0.5;
  auto model = nn::make_model(c, 9);
  Inference inference(*model, "fp32");
  for (const bool use_cache : {true, false}) {
    model->train(true);
    const PhiloxState before = model->generator().state();
    const std::string a = sample(*model, kVocabulary, inference,
                                 {.prompt = "ab", .tokens = 20, .use_cache = use_cache});
    EXPECT_TRUE(model->is_training());
    EXPECT_EQ(model->generator().state(), before) << "dropout drew masks";
    model->train(false);
    EXPECT_EQ(sample(*model, kVocabulary, inference,
                     {.prompt = "ab", .tokens = 20, .use_cache = use_cache}),
              a);
    EXPECT_FALSE(model->is_training());
  }
}

TEST(Sample, RunsUnderALowPrecisionPreset) {
  auto model = nn::make_model(tiny("gpt"), 4);
  model->train(false);
  Inference inference(*model, "bf16");
  inference.cast_parameters();
  const std::string text =
      sample(*model, kVocabulary, inference, {.prompt = "a", .tokens = 40, .seed = 5});
  EXPECT_EQ(text.size(), 41u);
  for (const char ch : text) EXPECT_NE(kVocabulary.find(ch), std::string::npos);
}

// Every tensor of a safetensors file, encoded: equal maps are bitwise equal.
std::map<std::string, std::vector<uint8_t>> tensors_of(const std::filesystem::path& file) {
  std::map<std::string, std::vector<uint8_t>> out;
  for (const auto& [name, t] : io::read_safetensors(file.string()).tensors)
    out[name] = io::encode_safetensors({{name, t}});
  return out;
}

class SampleObserver : public TrainObserver {
 public:
  void on_sample(int64_t step, const std::string& text) override {
    samples.emplace_back(step, text);
  }
  std::vector<std::pair<int64_t, std::string>> samples;
};

// Samples during training leave the run as it was: the same weights, losses and checkpoints,
// with dropout on (the decoder applies none and leaves the generator alone) and under an FP8
// preset (the samples' FP8 state is their own).
TEST(Sample, SamplesDuringTrainingChangeNothingOfTheRun) {
  const std::filesystem::path dir = test::scratch_path("mixp_sample_test_");
  std::filesystem::create_directories(dir);
  {
    std::ofstream text(dir / "corpus.txt");
    for (int i = 0; i < 400; ++i) text << "abc def. gh ij.\n";
  }
  for (const char* precision : {"fp32", "fp8", "bf16"}) {
    SCOPED_TRACE(precision);
    auto run = [&](int64_t sample_every, SampleObserver* observer) {
      RunConfig c;
      c.model = {
          .name = "gpt", .layers = 1, .heads = 2, .width = 16, .context = 16, .dropout = 0.1};
      c.data = (dir / "corpus.txt").string();
      c.batch = 4;
      c.train = {.precision = precision,
                 .steps = 12,
                 .lr = 0.01,
                 .seed = 7,
                 .threads = 1,
                 .out_dir = (dir / (precision + std::to_string(sample_every))).string(),
                 .eval_interval = 6,
                 .observer = observer,
                 .checkpoint_every = 5,
                 .sample_every = sample_every,
                 .sample_tokens = 30};
      return run_train(c);
    };
    SampleObserver observer;
    const TrainResult with = run(4, &observer), without = run(0, nullptr);
    ASSERT_EQ(observer.samples.size(), 3u);
    EXPECT_EQ(observer.samples[0].first, 4);
    EXPECT_EQ(observer.samples[2].first, 12);
    EXPECT_EQ(observer.samples[0].second.size(), 31u) << "the prompt and 30 characters";
    ASSERT_EQ(with.log.size(), without.log.size());
    for (size_t i = 0; i < with.log.size(); ++i) EXPECT_EQ(with.log[i].loss, without.log[i].loss);
    EXPECT_EQ(with.final_eval_loss, without.final_eval_loss);
    const std::string a = (dir / (std::string(precision) + "4")).string();
    const std::string b = (dir / (std::string(precision) + "0")).string();
    EXPECT_EQ(tensors_of(a + "/model.safetensors"), tensors_of(b + "/model.safetensors"));
    const auto checkpoints = io::list_checkpoints(a);
    ASSERT_FALSE(checkpoints.empty());
    for (const auto& [step, path] : checkpoints) {
      SCOPED_TRACE(path);
      EXPECT_EQ(tensors_of(path),
                tensors_of(std::filesystem::path(b) / std::filesystem::path(path).filename()));
    }
  }
  std::filesystem::remove_all(dir);
}

}  // namespace
}  // namespace mixp::train
