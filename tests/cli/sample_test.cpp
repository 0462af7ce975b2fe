// `mixp sample` and `mixp train --sample-every` from the command line: the text, its seed, the
// cache against --no-cache, the errors, and what a trained model's samples look like to it.
#include <gtest/gtest.h>

#include <cmath>
#include <nlohmann/json.hpp>
#include <numeric>

#include "cli/cli_fixture.h"
#include "mixp/io/checkpoint.h"
#include "mixp/train/sample.h"
#include "mixp/train/trained_model.h"

namespace mixp::cli_test {
namespace {

using nlohmann::json;

// A tiny gpt trained on rotating words: about a second.
class SampleCli : public Cli {
 protected:
  void SetUp() override {
    Cli::SetUp();
    std::ofstream(dir_ / "corpus.txt") << repeated_text(40000);
  }
  std::string train_args(const fs::path& out, int64_t steps) const {
    return "train --model gpt --data '" + (dir_ / "corpus.txt").string() + "' --steps " +
           std::to_string(steps) +
           " --layers 2 --heads 2 --width 32 --context 32 --lr 0.01 --threads 2 --out '" +
           out.string() + "'";
  }
  const fs::path& trained() {
    if (trained_.empty()) {
      trained_ = dir_ / "gpt";
      const CliResult r = mixp(train_args(trained_, 300));
      EXPECT_EQ(r.status, 0) << r.err;
    }
    return trained_;
  }
  fs::path trained_;
};

TEST_F(SampleCli, PrintsThePromptAndTheTextOfItsSeed) {
  const std::string from = "sample '" + trained().string() + "' --prompt 'in the' ";
  const CliResult a = mixp(from + "--tokens 100 --seed 3");
  ASSERT_EQ(a.status, 0) << a.err;
  ASSERT_EQ(a.out.size(), 6u + 100u + 1u) << a.out;
  EXPECT_TRUE(a.out.starts_with("in the"));
  EXPECT_EQ(mixp(from + "--tokens 100 --seed 3").out, a.out);
  EXPECT_NE(mixp(from + "--tokens 100 --seed 4").out, a.out);
  // Greedy decoding draws nothing; within the context the cache changes nothing either.
  const CliResult greedy = mixp(from + "--tokens 20 --top-k 1 --seed 1");
  ASSERT_EQ(greedy.status, 0) << greedy.err;
  EXPECT_EQ(mixp(from + "--tokens 20 --top-k 1 --seed 2").out, greedy.out);
  EXPECT_EQ(mixp(from + "--tokens 20 --top-k 1 --no-cache").out, greedy.out);
  const CliResult low = mixp(from + "--tokens 20 --precision bf16 --temperature 0.5 --top-k 3");
  EXPECT_EQ(low.status, 0) << low.err;
  EXPECT_TRUE(low.out.starts_with("in the")) << low.out;
}

TEST_F(SampleCli, BadFlagsAndPromptsExitWithTwoNamingThem) {
  const std::string from = "sample '" + trained().string() + "' ";
  for (const auto& [flags, message] : std::vector<std::pair<std::string, std::string>>{
           {"--tokens 0", "--tokens must be at least 1, got 0"},
           {"--temperature 0", "--temperature must be a finite number above 0, got 0"},
           {"--temperature nan", "--temperature must be a finite number above 0, got nan"},
           {"--top-k -1", "--top-k must be 0 (every token) or more, got -1"},
           {"--seed -1", "--seed must be an integer from 0"},
           {"--prompt 'the Qu'",
            "the prompt's character 'Q' at position 4 is not in the model's vocabulary of "},
           {"--precision fp64", "fp64"}}) {
    SCOPED_TRACE(flags);
    const CliResult r = mixp(from + flags);
    EXPECT_EQ(r.status, 2);
    EXPECT_NE(r.err.find(message), std::string::npos) << r.err;
    EXPECT_EQ(r.err.find(".cpp:"), std::string::npos) << r.err;
  }
  const fs::path regression = dir_ / "deep-mlp";
  ASSERT_EQ(mixp("train --model deep-mlp --steps 2 --threads 1 --out '" + regression.string() + "'")
                .status,
            0);
  const CliResult r = mixp("sample '" + regression.string() + "'");
  EXPECT_EQ(r.status, 2);
  EXPECT_NE(r.err.find("holds a deep-mlp model; mixp sample needs a text model"), std::string::npos)
      << r.err;
}

TEST_F(SampleCli, TrainPrintsSamplesAndResumeMayChangeTheirInterval) {
  const fs::path out = dir_ / "sampled";
  CliResult r =
      mixp(train_args(out, 20) + " --sample-every 10 --sample-tokens 25 --checkpoint-every 10");
  ASSERT_EQ(r.status, 0) << r.err;
  EXPECT_NE(r.out.find("sample at step 10:"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("sample at step 20:"), std::string::npos) << r.out;
  const json config = json::parse(test::slurp(out / "summary.json"))["config"]["train"];
  EXPECT_EQ(config["sample_every"], 10);
  EXPECT_EQ(config["sample_tokens"], 25);
  for (const char* name : {"model.safetensors", "summary.json"}) fs::remove(out / name);
  fs::remove(out / io::checkpoint_file_name(20));
  r = mixp("train --resume '" + out.string() + "' --sample-every 5");
  ASSERT_EQ(r.status, 0) << r.err;
  EXPECT_NE(r.out.find("--sample-every 5 instead of the run's 10"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("sample at step 15:"), std::string::npos) << r.out;
  r = mixp(train_args(dir_ / "never", 20) + " --sample-every -1");
  EXPECT_EQ(r.status, 2);
  EXPECT_NE(r.err.find("--sample-every must be 0 (none) or more, got -1"), std::string::npos)
      << r.err;
  r = mixp("train --model deep-mlp --steps 2 --threads 1 --sample-every 1 --out '" +
           (dir_ / "never").string() + "'");
  EXPECT_EQ(r.status, 2);
  EXPECT_NE(r.err.find("samples (--sample-every) need a text model (gpt or lstm)"),
            std::string::npos)
      << r.err;
  EXPECT_FALSE(fs::exists(dir_ / "never")) << "a refused run wrote its folder";
}

// Text drawn at temperature 1 is text the model finds as likely as the text it was evaluated
// on. For the sampled characters x_t, with p_t the model's distribution at step t (what the
// draw used), l_t = -log p_t(x_t) has the conditional mean H_t (the entropy of p_t) and the
// conditional variance V_t = sum p log^2 p - H_t^2, both computed exactly from p_t. So
// sum (l_t - H_t) is a martingale with variance sum V_t, and by its central limit theorem lies
// within 5 sqrt(sum V_t) of 0 (a false failure about once in 1.7 million runs); a draw from
// another distribution (a wrong temperature, top-k or softmax) drifts away from it.
// The mean loss is then compared with the run's evaluation loss, within 5 standard errors of
// each: the sample's, sqrt(sum V_t) / N; the evaluation's, s / sqrt(M), with s the per-character
// spread of the losses (the sample's, as the model and the text are alike) and M the characters
// the evaluation predicts, each once: the validation split, the corpus's last 10%.
TEST_F(SampleCli, ATrainedModelsSamplesAreAsLikelyToItAsItsEvaluationText) {
  const train::TrainedModel t = train::load_trained_model(trained().string());
  train::Inference inference(*t.model, "fp32");
  const int64_t n = 3000;
  const std::string prompt = "in the ";
  const std::string text =
      train::sample(*t.model, t.vocabulary, inference, {.prompt = prompt, .tokens = n, .seed = 11});
  train::NextTokenLogits next(*t.model, /*use_cache=*/true);
  next.append(train::encode_text(prompt, t.vocabulary));
  double loss = 0, entropy = 0, variance = 0, loss_squares = 0;
  for (size_t i = prompt.size(); i < text.size(); ++i) {
    std::vector<float> logits;
    inference.run([&] { logits = next.logits(); });
    const double top = *std::max_element(logits.begin(), logits.end());
    double total = 0;
    for (const float z : logits) total += std::exp(double(z) - top);
    double h = 0, h2 = 0;
    for (const float z : logits) {
      const double log_p = double(z) - top - std::log(total), p = std::exp(log_p);
      h -= p * log_p;
      h2 += p * log_p * log_p;
    }
    const int64_t token = int64_t(t.vocabulary.find(text[i]));
    const double l = -(double(logits[size_t(token)]) - top - std::log(total));
    loss += l;
    loss_squares += l * l;
    entropy += h;
    variance += h2 - h * h;
    next.append(std::span(&token, 1));
  }
  EXPECT_LE(std::fabs(loss - entropy), 5 * std::sqrt(variance));
  const json summary = json::parse(test::slurp(trained() / "summary.json"));
  const double eval_loss = summary["final_eval_loss"];
  const double mean = loss / double(n), spread = std::sqrt(loss_squares / double(n) - mean * mean);
  const double validation = double(fs::file_size(dir_ / "corpus.txt")) / 10;
  const double bound = 5 * std::sqrt(variance) / double(n) + 5 * spread / std::sqrt(validation);
  EXPECT_NEAR(mean, eval_loss, bound) << "mean entropy " << entropy / double(n);
}

}  // namespace
}  // namespace mixp::cli_test
