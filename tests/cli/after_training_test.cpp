// A model's life after training, from the command line: `mixp eval` over whole splits and under
// several presets, fine-tuning with --init-from, extending a run with --resume --steps, and data
// of the user's own (--classes, --val-fraction).
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cmath>
#include <nlohmann/json.hpp>

#include "cli/cli_fixture.h"
#include "dataset/files.h"
#include "mixp/io/checkpoint.h"

namespace mixp::cli_test {
namespace {

using nlohmann::json;
using test::slurp;
using ::testing::HasSubstr;

json read_json(const fs::path& file) { return json::parse(slurp(file)); }

// 'path', for a command line.
std::string quote(const fs::path& path) {
  std::string text = "'";
  text += path.string();
  text += "'";
  return text;
}

class AfterTraining : public Cli {
 protected:
  void SetUp() override {
    Cli::SetUp();
    text_ = repeated_text(6000);
    std::ofstream(dir_ / "text.txt", std::ios::binary) << text_;
  }
  // A tiny gpt on the test's text: a second or so a run.
  std::string gpt(const fs::path& out, const std::string& more) {
    return "train --model gpt --layers 2 --heads 2 --width 32 --context 32 --threads 2 --data '" +
           (dir_ / "text.txt").string() + "' --out '" + out.string() + "' " + more;
  }
  json eval_json(const std::string& args) {
    const CliResult r = mixp("eval " + args + " --json");
    EXPECT_EQ(r.status, 0) << r.err;
    return r.status == 0 ? json::parse(r.out) : json::object();
  }
  // A folder of IDX files of 8x8 images in `classes` classes, each class a bright stripe.
  fs::path image_set(const std::string& name, uint32_t classes) {
    const fs::path d = dir_ / name;
    fs::create_directories(d);
    auto images = [&](uint32_t n) {
      std::vector<uint8_t> px;
      for (uint32_t i = 0; i < n; ++i)
        for (uint32_t p = 0; p < 64; ++p)
          px.push_back(uint8_t((p % classes == i % classes ? 200 : 0) + p % 7));
      return data::test::idx_bytes(0x803, {n, 8, 8}, px);
    };
    auto labels = [&](uint32_t n) {
      std::vector<uint8_t> l;
      for (uint32_t i = 0; i < n; ++i) l.push_back(uint8_t(i % classes));
      return data::test::idx_bytes(0x801, {n}, l);
    };
    data::test::write_file(d / "train-images-idx3-ubyte", images(96));
    data::test::write_file(d / "train-labels-idx1-ubyte", labels(96));
    data::test::write_file(d / "t10k-images-idx3-ubyte", images(30));
    data::test::write_file(d / "t10k-labels-idx1-ubyte", labels(30));
    return d;
  }
  std::string text_;
};

TEST_F(AfterTraining, EvalIsTheTrainersFinalEvaluationOverTheWholeSplit) {
  for (const std::string precision : {"fp32", "amp-bf16", "bf16", "fp8"}) {
    SCOPED_TRACE(precision);
    const fs::path run = dir_ / precision;
    ASSERT_EQ(mixp(gpt(run, "--steps 30 --precision " + precision)).status, 0);
    const json summary = read_json(run / "summary.json");
    for (const fs::path& from : {run, run / "model.safetensors"}) {
      const json r = eval_json(quote(from));
      ASSERT_EQ(r["rows"].size(), 1u);
      EXPECT_EQ(r["rows"][0]["precision"], precision);  // the run's own by default
      // The same batches through the same function: the same bits.
      EXPECT_EQ(r["rows"][0]["loss"].get<double>(), summary["final_eval_loss"].get<double>());
      // Every character of the validation split after its first is predicted once.
      const int64_t n = int64_t(text_.size()), validation = n - int64_t(std::floor(n * 0.9));
      EXPECT_EQ(r["predictions"].get<int64_t>(), validation - 1);
    }
  }
}

TEST_F(AfterTraining, EvalOfTheValidationTextAsAFileGivesTheSameLoss) {
  const fs::path run = dir_ / "run";
  ASSERT_EQ(mixp(gpt(run, "--steps 30")).status, 0);
  const size_t train_bytes = size_t(std::floor(double(text_.size()) * 0.9));
  std::ofstream(dir_ / "validation.txt", std::ios::binary) << text_.substr(train_bytes);
  const json own = eval_json(quote(run));
  const json file =
      eval_json("'" + run.string() + "' --data '" + (dir_ / "validation.txt").string() + "'");
  EXPECT_EQ(file["rows"][0]["loss"].get<double>(), own["rows"][0]["loss"].get<double>());
  EXPECT_THAT(file["data"].get<std::string>(), HasSubstr("all of "));
  // A character the model never saw is named, with where it is.
  std::ofstream(dir_ / "odd.txt", std::ios::binary) << "in the Zebra";
  const CliResult r =
      mixp("eval '" + run.string() + "' --data '" + (dir_ / "odd.txt").string() + "'");
  EXPECT_EQ(r.status, 2);
  EXPECT_THAT(r.err, HasSubstr("character 'Z' (0x5A) at position 7"));
}

TEST_F(AfterTraining, ThePrecisionTableEvaluatesOneModelUnderEveryFormat) {
  const fs::path run = dir_ / "fp32";
  ASSERT_EQ(mixp(gpt(run, "--steps 60")).status, 0);
  const double trained = read_json(run / "summary.json")["final_eval_loss"].get<double>();
  const std::vector<std::string> presets = {"fp32", "amp-bf16", "amp-fp16", "fp8", "mxfp8"};
  const json r = eval_json("'" + run.string() + "' --precisions fp32,amp-bf16,amp-fp16,fp8,mxfp8");
  ASSERT_EQ(r["rows"].size(), presets.size());
  EXPECT_EQ(r["rows"][0]["loss"].get<double>(), trained);
  for (size_t i = 1; i < presets.size(); ++i) {
    SCOPED_TRACE(presets[i]);
    EXPECT_EQ(r["rows"][i]["precision"], presets[i]);
    const double loss = r["rows"][i]["loss"].get<double>();
    // Each format really ran (another rounding gives another loss), and a trained model is
    // robust to it: the loss moves by a small fraction, not by the model's loss itself.
    EXPECT_NE(loss, trained);
    EXPECT_LT(std::abs(loss - trained), 0.05 * trained);
  }
  const CliResult table = mixp("eval '" + run.string() + "' --precisions fp32,amp-fp16");
  ASSERT_EQ(table.status, 0) << table.err;
  EXPECT_THAT(table.out, HasSubstr("vs fp32"));
  EXPECT_THAT(table.out, HasSubstr("+0.0000%"));  // fp32 against itself
  EXPECT_THAT(table.out, HasSubstr("bits/char"));
  EXPECT_EQ(mixp("eval '" + run.string() + "' --precisions fp32,fp7").status, 2);
  const CliResult none = mixp("eval '" + (dir_ / "nowhere").string() + "'");
  EXPECT_EQ(none.status, 2);
  EXPECT_THAT(none.err, HasSubstr("no such run folder or model file"));
}

TEST_F(AfterTraining, EvalRefusesDataThatChangedSinceTraining) {
  const fs::path run = dir_ / "run";
  ASSERT_EQ(mixp(gpt(run, "--steps 5")).status, 0);
  std::ofstream(dir_ / "text.txt", std::ios::binary) << repeated_text(5000);
  const CliResult r = mixp("eval '" + run.string() + "'");
  EXPECT_EQ(r.status, 2);
  EXPECT_THAT(r.err, HasSubstr("is not the data this run trained on"));
  EXPECT_THAT(r.err, HasSubstr("--data"));
}

TEST_F(AfterTraining, AnExtendedRunIsBitwiseTheLongerRunUnderAConstantSchedule) {
  const fs::path longer = dir_ / "longer", extended = dir_ / "extended";
  const std::string flags = "--schedule constant --checkpoint-every 7";
  ASSERT_EQ(mixp(gpt(longer, "--steps 50 " + flags)).status, 0);
  ASSERT_EQ(mixp(gpt(extended, "--steps 20 " + flags)).status, 0);
  // A finished run keeps a checkpoint of its end, which is what it extends from.
  EXPECT_EQ(io::list_checkpoints(extended.string()).front().first, 20);
  CliResult r = mixp("train --resume '" + extended.string() + "' --steps 50");
  ASSERT_EQ(r.status, 0) << r.err;
  EXPECT_EQ(tensors(longer / "model.safetensors"), tensors(extended / "model.safetensors"));
  EXPECT_EQ(read_json(longer / "summary.json")["final_eval_loss"],
            read_json(extended / "summary.json")["final_eval_loss"]);
  EXPECT_EQ(read_json(extended / "summary.json")["steps"], 50);
  // Fewer steps than it has done is not an extension.
  r = mixp("train --resume '" + extended.string() + "' --steps 30");
  EXPECT_EQ(r.status, 2);
  EXPECT_THAT(r.err, HasSubstr("past the 30 steps asked"));
}

TEST_F(AfterTraining, AnExtendedCosineRunFollowsTheLongerSchedulesCurveFromWhereItResumes) {
  const fs::path longer = dir_ / "longer", extended = dir_ / "extended";
  const std::string flags = "--schedule warmup-cosine --warmup-steps 5 --log-interval 1";
  ASSERT_EQ(mixp(gpt(longer, "--steps 40 " + flags)).status, 0);
  ASSERT_EQ(mixp(gpt(extended, "--steps 16 " + flags)).status, 0);
  ASSERT_EQ(mixp("train --resume '" + extended.string() + "' --steps 40").status, 0);
  auto lrs = [](const fs::path& run) {
    std::vector<double> lr;
    std::ifstream in(run / "metrics.jsonl");
    for (std::string line; std::getline(in, line);) {
      const json j = json::parse(line);
      if (j.value("type", std::string("step")) == "step") lr.push_back(j["lr"].get<double>());
    }
    return lr;
  };
  const std::vector<double> a = lrs(longer), b = lrs(extended);
  ASSERT_EQ(a.size(), 40u);
  ASSERT_EQ(b.size(), 40u);
  for (size_t i = 16; i < 40; ++i) EXPECT_EQ(a[i], b[i]) << "step " << i + 1;
  EXPECT_NE(a[10], b[10]);  // the first 16 steps followed the shorter run's curve
}

TEST_F(AfterTraining, FineTuningStartsFromTheSavedLossNotFromChance) {
  const fs::path base = dir_ / "base", tuned = dir_ / "tuned", fresh = dir_ / "fresh";
  ASSERT_EQ(mixp(gpt(base, "--steps 120")).status, 0);
  const std::string once = "--steps 1 --log-interval 1 --lr 0.0001";
  CliResult r = mixp("train --init-from '" + (base / "model.safetensors").string() +
                     "' --threads 2 --data '" + (dir_ / "text.txt").string() + "' --out '" +
                     tuned.string() + "' " + once);
  ASSERT_EQ(r.status, 0) << r.err;
  ASSERT_EQ(mixp(gpt(fresh, once)).status, 0);
  const double trained = read_json(base / "summary.json")["final_train_loss"].get<double>();
  const double start = read_json(tuned / "summary.json")["final_train_loss"].get<double>();
  const double chance = read_json(fresh / "summary.json")["final_train_loss"].get<double>();
  EXPECT_LT(std::abs(start - trained), 0.25 * (chance - trained)) << start << " " << trained;
  const json config = read_json(tuned / "summary.json")["config"];
  EXPECT_EQ(config["init_from"], (base / "model.safetensors").string());
  EXPECT_EQ(config["model"]["layers"], 2);  // the shape came from the model
}

TEST_F(AfterTraining, InitFromListsEveryDifferenceOfNamesShapesAndVocabulary) {
  const fs::path base = dir_ / "base";
  ASSERT_EQ(mixp(gpt(base, "--steps 2")).status, 0);
  CliResult r = mixp("train --model gpt --layers 3 --heads 2 --width 32 --context 32 --data " +
                     quote(dir_ / "text.txt") + " --steps 1 --out " + quote(dir_ / "deeper") +
                     " --init-from " + quote(base));
  EXPECT_EQ(r.status, 2);
  EXPECT_THAT(r.err, HasSubstr("(12 differences)"));
  for (const char* part :
       {"ln_1.weight", "ln_1.bias", "attn.c_attn.weight", "attn.c_attn.bias", "attn.c_proj.weight",
        "attn.c_proj.bias", "ln_2.weight", "ln_2.bias", "mlp.c_fc.weight", "mlp.c_fc.bias",
        "mlp.c_proj.weight", "mlp.c_proj.bias"})
    EXPECT_THAT(r.err, HasSubstr(std::string("'transformer.h.2.") + part + "'"));
  EXPECT_FALSE(fs::exists(dir_ / "deeper" / "summary.json"));
  {
    std::ofstream other(dir_ / "other.txt", std::ios::binary);
    other << "XYZ " << repeated_text(3000);
  }
  r = mixp("train --init-from '" + base.string() + "' --steps 1 --data '" +
           (dir_ / "other.txt").string() + "' --out '" + (dir_ / "o").string() + "'");
  EXPECT_EQ(r.status, 2);
  EXPECT_THAT(r.err, HasSubstr("vocabulary"));
  EXPECT_THAT(r.err, HasSubstr("only in the data: 'XYZ'"));
}

TEST_F(AfterTraining, ImageSetsOfAnyNumberOfClasses) {
  const fs::path three = image_set("three", 3), run = dir_ / "mlp";
  CliResult r = mixp("train --model mlp --classes 3 --steps 12 --threads 1 --data '" +
                     three.string() + "' --out '" + run.string() + "'");
  ASSERT_EQ(r.status, 0) << r.err;
  const auto weights = io::read_safetensors((run / "model.safetensors").string()).tensors;
  EXPECT_EQ(weights.at("fc3.weight").size(0), 3);
  const json e = eval_json(quote(run));
  EXPECT_EQ(e["rows"][0]["loss"].get<double>(),
            read_json(run / "summary.json")["final_eval_loss"].get<double>());
  EXPECT_EQ(e["predictions"], 30);
  // Labels the classes do not cover are refused, naming the label.
  r = mixp("train --model mlp --classes 2 --steps 1 --data '" + three.string() + "' --out '" +
           (dir_ / "two").string() + "'");
  EXPECT_EQ(r.status, 2);
  EXPECT_THAT(r.err, HasSubstr("label"));
}

TEST_F(AfterTraining, ValFractionSetsTheValidationSplit) {
  const fs::path run = dir_ / "run";
  ASSERT_EQ(mixp(gpt(run, "--steps 3 --val-fraction 0.25")).status, 0);
  const int64_t n = int64_t(text_.size());
  const json e = eval_json(quote(run));
  EXPECT_EQ(e["predictions"].get<int64_t>(), n - int64_t(std::floor(double(n) * 0.75)) - 1);
  EXPECT_EQ(read_json(run / "summary.json")["config"]["val_fraction"], 0.25);
  EXPECT_EQ(mixp(gpt(dir_ / "bad", "--steps 3 --val-fraction 1")).status, 2);
}

}  // namespace
}  // namespace mixp::cli_test
