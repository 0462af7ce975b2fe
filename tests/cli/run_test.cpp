// Runs a user can trust, from the command line: one run per folder, checkpoints that verify,
// resumption that is bitwise for every optimizer and preset family, divergence that fails with
// a diagnosis, signals, and compare that survives a failed precision.
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/wait.h>

#include <chrono>
#include <nlohmann/json.hpp>
#include <set>
#include <thread>

#include "cli/cli_fixture.h"
#include "mixp/io/checkpoint.h"

namespace mixp::cli_test {
namespace {

using nlohmann::json;
using test::slurp;

// deep-mlp: synthetic data from the seed, a full batch per step, a fraction of a second a run.
std::string deep_mlp(const fs::path& out, const std::string& more) {
  return "train --model deep-mlp --threads 1 --out '" + out.string() + "' " + more;
}

json read_json(const fs::path& file) { return json::parse(slurp(file)); }

// Removes everything a run wrote after its oldest checkpoint: the folder as a run interrupted
// just after that checkpoint leaves it.
int64_t cut_back_to_oldest_checkpoint(const fs::path& dir) {
  const auto all = io::list_checkpoints(dir.string());
  for (size_t i = 0; i + 1 < all.size(); ++i) fs::remove(all[i].second);
  for (const char* name : {"model.safetensors", "summary.json", "loss.svg"}) fs::remove(dir / name);
  return all.back().first;
}

TEST_F(Cli, EveryOptimizerAndPresetFamilyResumesBitwise) {
  const std::vector<std::pair<std::string, std::string>> optimizers = {
      {"sgd", "--optimizer sgd --momentum 0.9"},
      {"sgd", "--optimizer sgd --momentum 0.9 --nesterov"},
      {"adam", "--optimizer adam"},
      {"adamw", "--optimizer adamw"}};
  for (size_t k = 0; k < optimizers.size(); ++k) {
    const auto& [name, optimizer] = optimizers[k];
    for (const std::string precision : {"fp32", "amp-fp16", "bf16", "fp8"}) {
      SCOPED_TRACE(optimizer + " " + precision);
      const std::string tag = std::to_string(k) + "-" + precision;
      const fs::path straight = dir_ / ("straight-" + tag), resumed = dir_ / ("resumed-" + tag);
      const std::string args = "--precision " + precision + " " + optimizer +
                               " --steps 9 --checkpoint-every 3 --lr 0.01";
      CliResult r = mixp(deep_mlp(straight, args));
      ASSERT_EQ(r.status, 0) << r.err;
      ASSERT_EQ(mixp(deep_mlp(resumed, args)).status, 0);
      ASSERT_EQ(cut_back_to_oldest_checkpoint(resumed), 6);  // the newest two: 6 and 9
      r = mixp("train --resume '" + resumed.string() + "'");
      ASSERT_EQ(r.status, 0) << r.err;
      EXPECT_NE(r.out.find("resumed from"), std::string::npos) << r.out;
      EXPECT_EQ(tensors(straight / "model.safetensors"), tensors(resumed / "model.safetensors"));
      const json a = read_json(straight / "summary.json"), b = read_json(resumed / "summary.json");
      EXPECT_EQ(a["final_train_loss"], b["final_train_loss"]);
      EXPECT_EQ(a["final_eval_loss"], b["final_eval_loss"]);
      EXPECT_EQ(b["config"]["train"]["optimizer"]["name"], name);
    }
  }
}

TEST_F(Cli, GradientAccumulationResumesBitwiseAndHoldsOnePartsActivations) {
  const fs::path whole = dir_ / "whole", straight = dir_ / "straight", resumed = dir_ / "resumed";
  const std::string args = "--steps 9 --checkpoint-every 3 --lr 0.01 --precision amp-fp16";
  ASSERT_EQ(mixp(deep_mlp(whole, args)).status, 0);
  CliResult r = mixp(deep_mlp(straight, args + " --grad-accum 8"));
  ASSERT_EQ(r.status, 0) << r.err;
  ASSERT_EQ(mixp(deep_mlp(resumed, args + " --grad-accum 8")).status, 0);
  ASSERT_EQ(cut_back_to_oldest_checkpoint(resumed), 6);
  r = mixp("train --resume '" + resumed.string() + "'");
  ASSERT_EQ(r.status, 0) << r.err;
  EXPECT_EQ(tensors(straight / "model.safetensors"), tensors(resumed / "model.safetensors"));
  const json a = read_json(whole / "summary.json"), b = read_json(straight / "summary.json");
  EXPECT_EQ(b["config"]["train"]["grad_accum"], 8);
  // The same 4096-sample steps, an eighth of the activations alive at a time.
  const double full = a["peak_memory_bytes"]["activation"].get<double>();
  const double part = b["peak_memory_bytes"]["activation"].get<double>();
  EXPECT_LT(part, 0.25 * full) << part << " of " << full;
  r = mixp("train --resume '" + resumed.string() + "' --grad-accum 4");
  EXPECT_EQ(r.status, 2);
  EXPECT_NE(r.err.find("--grad-accum 4 differs from the run's 8"), std::string::npos) << r.err;
  r = mixp(deep_mlp(dir_ / "odd", "--steps 1 --batch 100 --grad-accum 3"));
  EXPECT_EQ(r.status, 2);
  EXPECT_NE(r.err.find("a batch of 100 samples does not split into 3 equal micro-batches"),
            std::string::npos)
      << r.err;
}

TEST_F(Cli, CompareUnderMpirunWithSeveralRanksIsRefused) {
  // What mpirun sets for rank 1 of 2: each rank would otherwise run the whole comparison alone.
  ::setenv("OMPI_COMM_WORLD_SIZE", "2", 1);
  ::setenv("OMPI_COMM_WORLD_RANK", "1", 1);
  const CliResult compare = mixp("compare --model deep-mlp --precisions fp32 --steps 1 --out '" +
                                 (dir_ / "cmp").string() + "'");
  ::unsetenv("OMPI_COMM_WORLD_SIZE");
  ::unsetenv("OMPI_COMM_WORLD_RANK");
  EXPECT_EQ(compare.status, 2);
  EXPECT_NE(compare.err.find("rank 1 of 2 started by mpirun, and mixp compare runs as one process"),
            std::string::npos)
      << compare.err;
  EXPECT_FALSE(fs::exists(dir_ / "cmp"));
}

TEST_F(Cli, OptimizerAndScheduleFlagsReachTheRun) {
  const fs::path out = dir_ / "sgd";
  const CliResult r = mixp(deep_mlp(out,
                                    "--steps 4 --optimizer sgd --momentum 0.5 --lr 0.1 "
                                    "--schedule constant --clip-norm 0 --log-interval 1"));
  ASSERT_EQ(r.status, 0) << r.err;
  const json config = read_json(out / "summary.json")["config"]["train"];
  EXPECT_EQ(config["optimizer"]["momentum"], 0.5);
  EXPECT_EQ(config["schedule"]["name"], "constant");
  EXPECT_EQ(config["clip_norm"], 0.0);
  std::istringstream metrics(slurp(out / "metrics.jsonl"));
  int lines = 0, evals = 0;
  for (std::string line; std::getline(metrics, line);) {
    const json j = json::parse(line);
    if (j["type"] == "eval") {
      ++evals;
      continue;
    }
    EXPECT_EQ(j["type"], "step");
    EXPECT_EQ(j["lr"], 0.1);
    ++lines;
  }
  EXPECT_EQ(lines, 4);
  EXPECT_GE(evals, 1);
  // Settings that do not fit the optimizer or schedule are refused before anything is written.
  for (const std::string bad :
       {"--optimizer adam --momentum 0.9", "--optimizer sgd --betas 0.9,0.99",
        "--schedule constant --warmup-steps 5", "--clip-norm -1", "--optimizer lion",
        "--nesterov --optimizer sgd"}) {
    SCOPED_TRACE(bad);
    const fs::path never = dir_ / "never";
    const CliResult e = mixp(deep_mlp(never, "--steps 2 " + bad));
    EXPECT_EQ(e.status, 2);
    EXPECT_FALSE(e.err.empty());
    EXPECT_EQ(e.err.find(".cpp:"), std::string::npos) << e.err;
    EXPECT_FALSE(fs::exists(never)) << "a refused run wrote its folder";
  }
}

TEST_F(Cli, AFolderHoldingAnotherRunIsRefusedUnlessOverwritten) {
  const fs::path out = dir_ / "run";
  ASSERT_EQ(mixp(deep_mlp(out, "--steps 3")).status, 0);
  const std::string first_id = read_json(out / "run.json")["run_id"];
  const auto first_model = tensors(out / "model.safetensors");
  CliResult r = mixp(deep_mlp(out, "--steps 3 --lr 0.5"));
  EXPECT_EQ(r.status, 2);
  for (const char* file : {"metrics.jsonl", "model.safetensors", "run.json", "summary.json"})
    EXPECT_NE(r.err.find(file), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("--overwrite"), std::string::npos) << r.err;
  EXPECT_EQ(read_json(out / "run.json")["run_id"], first_id) << "the refused run wrote over it";
  EXPECT_EQ(tensors(out / "model.safetensors"), first_model);
  r = mixp(deep_mlp(out, "--steps 3 --lr 0.5 --overwrite"));
  ASSERT_EQ(r.status, 0) << r.err;
  const json run = read_json(out / "run.json"), summary = read_json(out / "summary.json");
  EXPECT_NE(run["run_id"], first_id);
  EXPECT_EQ(summary["run_id"], run["run_id"]);
  EXPECT_EQ(summary["config"]["train"]["lr"], 0.5);
  std::istringstream metrics(slurp(out / "metrics.jsonl"));
  for (std::string line; std::getline(metrics, line);)
    EXPECT_EQ(json::parse(line)["run_id"], run["run_id"]);
}

TEST_F(Cli, AnotherRunsCheckpointsAreNeitherResumedNorPruned) {
  const fs::path mine = dir_ / "mine", other = dir_ / "other", straight = dir_ / "straight";
  ASSERT_EQ(mixp(deep_mlp(straight, "--steps 8 --checkpoint-every 2")).status, 0);
  ASSERT_EQ(mixp(deep_mlp(mine, "--steps 8 --checkpoint-every 2")).status, 0);
  ASSERT_EQ(mixp(deep_mlp(other, "--steps 20 --checkpoint-every 2 --lr 0.3")).status, 0);
  // A newer checkpoint of another run in this run's folder, and this run cut back to step 6.
  fs::copy_file(other / io::checkpoint_file_name(20), mine / io::checkpoint_file_name(20));
  fs::remove(mine / io::checkpoint_file_name(8));
  for (const char* name : {"model.safetensors", "summary.json"}) fs::remove(mine / name);
  const CliResult r = mixp("train --resume '" + mine.string() + "'");
  ASSERT_EQ(r.status, 0) << r.err;
  EXPECT_NE(r.out.find("checkpoint-00000020.safetensors: it belongs to another run"),
            std::string::npos)
      << r.out;
  EXPECT_NE(r.out.find("resumed from " + (mine / io::checkpoint_file_name(6)).string()),
            std::string::npos)
      << r.out;
  EXPECT_EQ(tensors(straight / "model.safetensors"), tensors(mine / "model.safetensors"));
  EXPECT_TRUE(fs::exists(mine / io::checkpoint_file_name(20))) << "pruned another run's file";
}

TEST_F(Cli, ASecondProcessIsRefusedNamingTheFirst) {
  const fs::path text = dir_ / "corpus.txt", out = dir_ / "busy";
  std::ofstream(text) << repeated_text(40000);
  const std::string args = "train --model gpt --data '" + text.string() +
                           "' --steps 100000 --layers 1 --heads 2 --width 16 --context 16 "
                           "--threads 1 --checkpoint-every 20 --out '" +
                           out.string() + "'";
  const pid_t pid = spawn(args);
  ASSERT_GT(pid, 0);
  for (int i = 0; i < 30000 && io::list_checkpoints(out.string()).empty(); ++i)
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  for (const std::string& second :
       {args, "train --resume '" + out.string() + "'", args + " --overwrite"}) {
    const CliResult r = mixp(second);
    EXPECT_EQ(r.status, 2) << second;
    EXPECT_NE(r.err.find("is in use by process " + std::to_string(pid)), std::string::npos)
        << r.err;
  }
  ASSERT_EQ(::kill(pid, SIGTERM), 0);
  int status = 0;
  ASSERT_EQ(::waitpid(pid, &status, 0), pid);
  EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << status << slurp(dir_ / "bg.err");
  EXPECT_NE(slurp(dir_ / "bg.err").find("terminated (SIGTERM)"), std::string::npos);
  // The first run's metrics are whole lines of its own.
  std::istringstream metrics(slurp(out / "metrics.jsonl"));
  for (std::string line; std::getline(metrics, line);) EXPECT_NO_THROW(json::parse(line)) << line;
}

TEST_F(Cli, SighupStopsWithACheckpointAndASecondSignalExitsAtOnce) {
  const fs::path text = dir_ / "corpus.txt";
  std::ofstream(text) << repeated_text(40000);
  // Steps of a few hundred milliseconds: the second signal comes while the first one's step
  // is still running.
  auto args = [&](const fs::path& out) {
    return "train --model gpt --data '" + text.string() +
           "' --steps 100000 --layers 2 --heads 4 --width 256 --context 128 --threads 1 "
           "--checkpoint-every 2 --out '" +
           out.string() + "'";
  };
  auto wait_for_checkpoint = [](const fs::path& dir) {
    for (int i = 0; i < 30000 && io::list_checkpoints(dir.string()).empty(); ++i)
      std::this_thread::sleep_for(std::chrono::milliseconds(1));
    return !io::list_checkpoints(dir.string()).empty();
  };
  pid_t pid = spawn(args(dir_ / "hup"));
  ASSERT_TRUE(wait_for_checkpoint(dir_ / "hup"));
  ASSERT_EQ(::kill(pid, SIGHUP), 0);
  int status = 0;
  ASSERT_EQ(::waitpid(pid, &status, 0), pid);
  ASSERT_TRUE(WIFEXITED(status)) << status;
  EXPECT_EQ(WEXITSTATUS(status), 0);
  EXPECT_NE(slurp(dir_ / "bg.err").find("hangup (SIGHUP)"), std::string::npos);
  EXPECT_NE(slurp(dir_ / "bg.out").find("stopped by signal 1"), std::string::npos);

  pid = spawn(args(dir_ / "twice"));
  ASSERT_TRUE(wait_for_checkpoint(dir_ / "twice"));
  ASSERT_EQ(::kill(pid, SIGINT), 0);
  for (int i = 0; i < 10000 && slurp(dir_ / "bg.err").find("interrupted") == std::string::npos; ++i)
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  ASSERT_EQ(::kill(pid, SIGINT), 0);
  ASSERT_EQ(::waitpid(pid, &status, 0), pid);
  EXPECT_TRUE(WIFSIGNALED(status) && WTERMSIG(status) == SIGINT) << status;
  for (const auto& [step, path] : io::list_checkpoints((dir_ / "twice").string()))
    EXPECT_NO_THROW(io::read_checkpoint(path)) << path;
}

TEST_F(Cli, ADivergingFp16RunExitsTwoNamingTheOverflowAndKeepsNoModel) {
  for (const std::string precision : {"fp16", "amp-fp16"}) {
    SCOPED_TRACE(precision);
    const fs::path out = dir_ / precision;
    const CliResult r = mixp(
        deep_mlp(out, "--precision " + precision + " --lr 1000 --steps 300 --checkpoint-every 5"));
    EXPECT_EQ(r.status, 2) << r.out;
    EXPECT_NE(r.err.find("the run diverged at step"), std::string::npos) << r.err;
    EXPECT_NE(r.err.find("the gradient of '"), std::string::npos) << r.err;
    const int64_t at = std::stoll(r.err.substr(r.err.find("diverged at step ") + 17));
    EXPECT_LE(at, 60) << "a diverged run went on";
    EXPECT_FALSE(fs::exists(out / "model.safetensors"));
    EXPECT_FALSE(fs::exists(out / "summary.json"));
    const auto all = io::list_checkpoints(out.string());
    ASSERT_FALSE(all.empty());
    EXPECT_LE(all.front().first, at);
    EXPECT_FALSE(io::find_nonfinite(io::read_checkpoint(all.front().second).file));
    EXPECT_NE(r.err.find(all.front().second + ", is kept"), std::string::npos) << r.err;
  }
}

TEST_F(Cli, OutOfRangeNumbersAreRefusedNotCoerced) {
  for (const std::string bad :
       {"--seed -1", "--seed 18446744073709551616", "--seed 1.5", "--steps 99999999999999999999",
        "--steps -3", "--batch -1", "--min-loss-scale -1", "--max-skipped-fraction 2"}) {
    SCOPED_TRACE(bad);
    const fs::path out = dir_ / "never";
    const CliResult r = mixp(deep_mlp(out, bad));
    EXPECT_EQ(r.status, 2);
    EXPECT_NE(r.err.find(bad.substr(0, bad.find(' '))), std::string::npos) << r.err;
    EXPECT_FALSE(fs::exists(out));
  }
}

TEST_F(Cli, ARunThatWouldNotFitIsRefusedBeforeItStarts) {
  const fs::path text = dir_ / "corpus.txt", out = dir_ / "huge";
  std::ofstream(text) << repeated_text(80000);
  const std::string gpt = "train --model gpt --data '" + text.string() +
                          "' --steps 2 --layers 1 --heads 2 --width 16 --context 16 --out '" +
                          out.string() + "' ";
  CliResult r = mixp(gpt + "--batch 4000 --max-memory 8M");
  EXPECT_EQ(r.status, 2);
  EXPECT_NE(r.err.find("this run needs about"), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("for a step of 4000 samples"), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("8.0 MiB of --max-memory"), std::string::npos) << r.err;
  EXPECT_FALSE(fs::exists(out));
  r = mixp(gpt + "--batch 4 --max-memory 8M");
  EXPECT_EQ(r.status, 0) << r.err;
  EXPECT_EQ(mixp(gpt + "--max-memory 8X").status, 2);
}

TEST_F(Cli, FinishedRunsDescribeThemselves) {
  const CliResult v = mixp("--version");
  ASSERT_EQ(v.status, 0);
  EXPECT_EQ(v.out.rfind("mixp ", 0), 0u) << v.out;
  const std::string version = v.out.substr(5, v.out.find('\n') - 5);
  const fs::path text = dir_ / "corpus.txt", out = dir_ / "gpt";
  std::ofstream(text) << repeated_text(8000);
  const CliResult r = mixp(
      "train --model gpt --data corpus.txt --steps 3 --layers 1 --heads 2 "
      "--width 16 --context 16 --seed 7 --out '" +
          out.string() + "'",
      "", dir_);
  ASSERT_EQ(r.status, 0) << r.err;
  const json summary = read_json(out / "summary.json");
  EXPECT_EQ(summary["mixp_version"], version);
  EXPECT_EQ(summary["config"]["data"], fs::canonical(text).string());
  const std::string written = slurp(text);
  const std::set<unsigned char> distinct(written.begin(), written.end());
  EXPECT_EQ(summary["config"]["data_fingerprint"]["vocabulary"],
            std::string(distinct.begin(), distinct.end()));
  EXPECT_EQ(summary["config"]["train"]["seed"], 7);
  EXPECT_EQ(summary["config"]["model"]["width"], 16);
  const io::SafetensorsFile model = io::read_safetensors((out / "model.safetensors").string());
  EXPECT_EQ(model.metadata.at("run_id"), summary["run_id"]);
  EXPECT_EQ(json::parse(model.metadata.at("config")), summary["config"]);
}

TEST_F(Cli, ResumeChecksTheDataAndFindsItFromAnotherFolder) {
  const fs::path text = dir_ / "corpus.txt", out = dir_ / "gpt", elsewhere = dir_ / "elsewhere";
  std::ofstream(text) << repeated_text(8000);
  fs::create_directories(elsewhere);
  const std::string args =
      "train --model gpt --data corpus.txt --steps 6 --layers 1 --heads 2 "
      "--width 16 --context 16 --threads 1 --checkpoint-every 3 --out '" +
      out.string() + "'";
  ASSERT_EQ(mixp(args, "", dir_).status, 0);
  fs::remove(out / io::checkpoint_file_name(6));
  CliResult r = mixp("train --resume '" + out.string() + "'", "", elsewhere);
  ASSERT_EQ(r.status, 0) << r.err;
  // The same characters in another order: the vocabulary matches, the data does not.
  std::string changed = slurp(text);
  std::swap(changed[10], changed[11]);
  std::ofstream(text) << changed;
  fs::remove(out / io::checkpoint_file_name(6));
  r = mixp("train --resume '" + out.string() + "'", "", elsewhere);
  EXPECT_EQ(r.status, 2);
  EXPECT_NE(r.err.find("is not the data this run trained on"), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("crc32"), std::string::npos) << r.err;
}

TEST_F(Cli, VersionOneCheckpointsStillResumeBitwise) {
  for (const std::string name : {"v1-deep-mlp-amp-fp16", "v1-gpt-bf16"}) {
    SCOPED_TRACE(name);
    const fs::path run = dir_ / name;
    fs::copy(fs::path(MIXP_TRAIN_FIXTURES) / name, run);
    // The fixtures' expected models were trained on the fast kernels.
    const CliResult r = mixp_fast("train --resume .", run);
    ASSERT_EQ(r.status, 0) << r.err;
    EXPECT_NE(r.out.find("resumed from ./checkpoint-00000003.safetensors"), std::string::npos)
        << r.out;
    EXPECT_EQ(tensors(run / "expected-model.safetensors"), tensors(run / "model.safetensors"));
    // The folder takes a run id from now on: its next checkpoints are the run's own.
    const std::string id = read_json(run / "run.json")["run_id"];
    EXPECT_EQ(io::checkpoint_run_id((run / io::checkpoint_file_name(6)).string()), id);
  }
}

TEST_F(Cli, CompareRecordsAFailedPrecisionAndFinishesTheOthers) {
  const fs::path out = dir_ / "compare";
  const std::string args =
      "compare --model deep-mlp --precisions fp32,fp16 --lr 1000 "
      "--steps 30 --threads 1 --out '" +
      out.string() + "'";
  CliResult r = mixp(args);
  EXPECT_EQ(r.status, 2);
  // fp32 fails by whichever check its overflow meets first: the evaluation loss on the fast
  // kernels, the gradient norm on the reference ones (MIXP_REFERENCE=1). The table and the
  // record carry the run's own error.
  json doc = read_json(out / "compare.json");
  ASSERT_EQ(doc["runs"].size(), 2u);
  EXPECT_EQ(doc["runs"][0]["failed"], true);
  const std::string error = doc["runs"][0]["error"];
  EXPECT_TRUE(error.find("diverged") != std::string::npos ||
              error.find("has no loss scaling") != std::string::npos)
      << error;
  EXPECT_NE(r.out.find("fp32       FAILED: " + error), std::string::npos) << r.out;
  EXPECT_NE(r.err.find("1 of 2 precisions failed"), std::string::npos) << r.err;
  EXPECT_EQ(doc["runs"][1]["failed"], false);
  EXPECT_EQ(doc["baseline"], "fp16");
  // --resume keeps the finished precision as it is and runs the failed one again.
  const std::string finished = slurp(out / "fp16" / "summary.json");
  r = mixp(args + " --resume");
  EXPECT_EQ(r.status, 2);
  EXPECT_EQ(slurp(out / "fp16" / "summary.json"), finished);
  doc = read_json(out / "compare.json");
  EXPECT_EQ(doc["runs"][1]["run_id"], json::parse(finished)["run_id"]);
  // compare takes the run flags; a second compare into the folder is refused.
  r = mixp(
      "compare --model deep-mlp --precisions fp32 --steps 4 --checkpoint-every 2 "
      "--on-nonfinite skip --threads 1 --out '" +
      (dir_ / "flags").string() + "'");
  ASSERT_EQ(r.status, 0) << r.err;
  EXPECT_FALSE(io::list_checkpoints((dir_ / "flags" / "fp32").string()).empty());
  EXPECT_EQ(mixp(args).status, 2);
}

TEST_F(Cli, ASigtermedCompareKeepsWhatFinishedAndResumes) {
  const fs::path out = dir_ / "compare";
  const std::string args =
      "compare --model deep-mlp --precisions fp32,amp-bf16 --steps 200 "
      "--log-interval 50 --threads 1 --out '" +
      out.string() + "'";
  const pid_t pid = spawn(args);
  ASSERT_GT(pid, 0);
  // The second precision has begun: the first has finished.
  for (int i = 0; i < 60000 && !fs::exists(out / "amp-bf16" / "metrics.jsonl"); ++i)
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  ASSERT_EQ(::kill(pid, SIGTERM), 0);
  int status = 0;
  ASSERT_EQ(::waitpid(pid, &status, 0), pid);
  ASSERT_TRUE(WIFEXITED(status)) << status;
  EXPECT_EQ(WEXITSTATUS(status), 0) << slurp(dir_ / "bg.err");
  EXPECT_NE(slurp(dir_ / "bg.out").find("amp-bf16   STOPPED: stopped at step"), std::string::npos)
      << slurp(dir_ / "bg.out");
  json doc = read_json(out / "compare.json");
  ASSERT_EQ(doc["runs"].size(), 2u);
  EXPECT_EQ(doc["runs"][0]["failed"], false);
  EXPECT_EQ(doc["runs"][1]["stopped"], true);
  const std::string finished = slurp(out / "fp32" / "summary.json");
  const CliResult r = mixp(args + " --resume");
  ASSERT_EQ(r.status, 0) << r.err;
  EXPECT_EQ(slurp(out / "fp32" / "summary.json"), finished);
  doc = read_json(out / "compare.json");
  EXPECT_EQ(doc["runs"][1]["failed"], false);
  EXPECT_EQ(doc["runs"][1]["steps"], 200);
}

}  // namespace
}  // namespace mixp::cli_test
