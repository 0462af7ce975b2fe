// `mixp bench dp` and `mixp bench allreduce`: what they read from a run's summary.json, their
// arithmetic, the commands they launch, and (with MPI) a run on a tiny model whose printed
// figures are recomputed here from the run folders it leaves. No timing is asserted.
#include <gtest/gtest.h>
#include <sys/wait.h>

#include <algorithm>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "bench/bench.h"
#include "mixp/error.h"
#include "support/scratch.h"

namespace mixp::bench {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;

class DpBench : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = test::scratch_path("mixp_dp_bench_test_");
    fs::create_directories(dir_);
  }
  void TearDown() override { fs::remove_all(dir_); }

  // A summary.json as mixp train writes it (src/train/report.cpp), with these figures.
  fs::path write_summary(const std::string& name, int world_size, const json& reduce_dtype,
                         int64_t bytes, double step_ms, double samples_per_s) {
    const json summary = {{"world_size", world_size},
                          {"reduce_dtype", reduce_dtype},
                          {"bytes_sent_per_step", bytes},
                          {"median_step_ms", step_ms},
                          {"samples_per_s", samples_per_s},
                          {"peak_memory_bytes", {{"gradient", 4 * 1000}, {"total", 9 * 1000}}},
                          {"config",
                           {{"model",
                             {{"name", "gpt"},
                              {"vocab", 73},
                              {"layers", 2},
                              {"heads", 2},
                              {"width", 32},
                              {"context", 16},
                              {"classes", 10},
                              {"image_size", 28},
                              {"dropout", 0.0}}}}}};
    const fs::path path = dir_ / (name + ".json");
    std::ofstream(path) << summary.dump(2);
    return path;
  }

  fs::path dir_;
};

TEST_F(DpBench, ReadsTheFiguresOfASummary) {
  const fs::path path = write_summary("two", 2, "bf16", 6389272, 70.5, 225.25);
  const DpRunSummary s = read_dp_summary(path.string());
  EXPECT_EQ(s.world_size, 2);
  EXPECT_EQ(s.reduce_dtype, "bf16");
  EXPECT_EQ(s.bytes_sent_per_step, 6389272);
  EXPECT_EQ(s.median_step_ms, 70.5);
  EXPECT_EQ(s.samples_per_s, 225.25);
  EXPECT_EQ(s.peak_memory_bytes.at("gradient"), 4000);
  EXPECT_EQ(s.peak_memory_bytes.at("total"), 9000);
  EXPECT_EQ(s.model.name, "gpt");
  EXPECT_EQ(s.model.vocab, 73);
  EXPECT_EQ(s.model.layers, 2);
  EXPECT_EQ(s.model.context, 16);
  // One process writes null: no reduction.
  EXPECT_EQ(read_dp_summary(write_summary("one", 1, nullptr, 0, 60, 130).string()).reduce_dtype,
            "");
}

TEST_F(DpBench, RefusesASummaryWithoutAFigureNamingFileAndField) {
  const fs::path path = write_summary("s", 2, "f32", 100, 70, 200);
  json j = json::parse(test::slurp(path));
  j.erase("median_step_ms");
  std::ofstream(path) << j.dump();
  try {
    read_dp_summary(path.string());
    FAIL() << "no error";
  } catch (const Error& e) {
    EXPECT_NE(e.message().find("median_step_ms"), std::string::npos) << e.message();
    EXPECT_NE(e.message().find(path.string()), std::string::npos) << e.message();
  }
  j["median_step_ms"] = "fast";
  std::ofstream(path) << j.dump();
  EXPECT_THROW(read_dp_summary(path.string()), Error);
  std::ofstream(path) << "not json";
  EXPECT_THROW(read_dp_summary(path.string()), Error);
  EXPECT_THROW(read_dp_summary((dir_ / "missing.json").string()), Error);
}

TEST_F(DpBench, WeakScalingIsPerRankThroughputOverOneRanks) {
  const DpRunSummary one = read_dp_summary(write_summary("a", 1, nullptr, 0, 61.5, 128).string());
  const DpRunSummary two =
      read_dp_summary(write_summary("b", 2, "f32", 12778520, 70.25, 230).string());
  EXPECT_DOUBLE_EQ(weak_scaling_efficiency(one, two), (230.0 / 2) / 128.0);
  EXPECT_DOUBLE_EQ(weak_scaling_efficiency(one, one), 1.0);
  EXPECT_DOUBLE_EQ(exposed_communication_ms(one, two), 70.25 - 61.5);
  EXPECT_DOUBLE_EQ(exposed_communication_ms(one, one), 0.0);
}

// The gpt's parameters counted from its architecture (nanoGPT, lm_head tied to wte): the
// payload of an f32 all-reduce.
TEST(DpBenchPayload, IsTheGptsParameterBytesInF32) {
  for (const auto& [layers, width, context, vocab] :
       std::vector<std::tuple<int, int64_t, int64_t, int64_t>>{{4, 256, 64, 73}, {1, 32, 16, 5}}) {
    const int64_t c = width;
    const int64_t per_layer = 2 * c                // ln_1
                              + 3 * c * c + 3 * c  // attn.c_attn
                              + c * c + c          // attn.c_proj
                              + 2 * c              // ln_2
                              + 4 * c * c + 4 * c  // mlp.c_fc
                              + 4 * c * c + c;     // mlp.c_proj
    const int64_t parameters = vocab * c + context * c + layers * per_layer + 2 * c;
    const nn::ModelConfig config{.name = "gpt",
                                 .vocab = vocab,
                                 .layers = layers,
                                 .heads = 2,
                                 .width = width,
                                 .context = context};
    EXPECT_EQ(gradient_payload_bytes(config), 4 * parameters) << layers << " layers";
  }
}

TEST(DpBenchCommand, TrainsTheSamePerRankBatchOnOneThread) {
  DpBenchOptions o;
  o.batch_per_rank = 8;
  o.data = "/text.txt";
  const auto value_of = [](const std::vector<std::string>& argv, const std::string& flag) {
    const auto it = std::find(argv.begin(), argv.end(), flag);
    return it == argv.end() || it + 1 == argv.end() ? std::string("(absent)") : *(it + 1);
  };
  const std::vector<std::string> one =
      dp_train_arguments(o, "/bin/mixp", 1, "f32", 25, "/runs/n1", false, 2);
  const std::vector<std::string> two =
      dp_train_arguments(o, "/bin/mixp", 2, "bf16", 4, "/runs/n2", true, 2);
  EXPECT_EQ(one.front(), "mpirun");
  EXPECT_EQ(value_of(one, "-np"), "1");
  EXPECT_EQ(value_of(two, "-np"), "2");
  EXPECT_EQ(value_of(one, "--batch"), "8");
  EXPECT_EQ(value_of(two, "--batch"), "16");
  EXPECT_EQ(value_of(one, "--threads"), "1");
  EXPECT_EQ(value_of(two, "--threads"), "1");
  EXPECT_EQ(value_of(two, "--data"), "/text.txt");
  EXPECT_EQ(value_of(two, "--out"), "/runs/n2");
  EXPECT_EQ(value_of(two, "--reduce-dtype"), "bf16");
  EXPECT_EQ(value_of(two, "--bucket-mb"), "4");
  EXPECT_EQ(value_of(one, "--reduce-dtype"), "(absent)");  // one rank reduces nothing
  EXPECT_EQ(value_of(two, "--zero"), "(absent)");
  EXPECT_EQ(value_of(dp_train_arguments(o, "/bin/mixp", 2, "f32", 4, "/runs/z", false, 2, 1),
                     "--zero"),
            "1");
  EXPECT_EQ(std::count(one.begin(), one.end(), "--allow-run-as-root"), 0);
  EXPECT_EQ(std::count(two.begin(), two.end(), "--allow-run-as-root"), 1);
  EXPECT_EQ(std::count(two.begin(), two.end(), "--oversubscribe"), 0);
  const std::vector<std::string> crowded =
      dp_train_arguments(o, "/bin/mixp", 2, "f32", 1, "/runs/c", false, 1);
  EXPECT_EQ(std::count(crowded.begin(), crowded.end(), "--oversubscribe"), 1);
  EXPECT_EQ(value_of(crowded, "--bucket-mb"), "1");

  // Two processes at once, each training one rank's batch alone into its own folder.
  const std::vector<std::string> pair = dp_pair_arguments(o, "/bin/mixp", "/runs/pair", false, 2);
  EXPECT_EQ(value_of(pair, "-np"), "2");
  EXPECT_EQ(value_of(pair, "--batch"), "8");
  EXPECT_EQ(value_of(pair, "--threads"), "1");
  EXPECT_EQ(value_of(pair, "--out"), "(absent)");  // the shell adds -0 or -1 to the folder
  EXPECT_EQ(value_of(pair, "--reduce-dtype"), "(absent)");
  const auto script = std::find(pair.begin(), pair.end(), "-c");
  ASSERT_NE(script, pair.end());
  ASSERT_LT(script + 2, pair.end());
  EXPECT_NE((script + 1)->find("-u OMPI_COMM_WORLD_SIZE"), std::string::npos) << *(script + 1);
  EXPECT_EQ(*(script + 2), "/runs/pair");
}

TEST(DpBenchOptions, AreCheckedBeforeAnythingRuns) {
  std::FILE* out = std::tmpfile();
  DpBenchOptions o;
  o.rounds = 0;
  EXPECT_THROW(run_dp_bench(o, out), Error);
  o = DpBenchOptions{};
  o.bucket_mb = {25, -1};
  EXPECT_THROW(run_dp_bench(o, out), Error);
  o = DpBenchOptions{};
  o.bucket_mb = {};
  EXPECT_THROW(run_dp_bench(o, out), Error);
  o = DpBenchOptions{};
  o.data = "/no/such/text.txt";
  try {
    run_dp_bench(o, out);
    FAIL() << "no error";
  } catch (const Error& e) {
    EXPECT_NE(e.message().find("/no/such/text.txt"), std::string::npos) << e.message();
  }
  AllReduceBenchOptions a;
  a.dtype = DType::f16;
  EXPECT_THROW(run_allreduce_bench(a, out), Error);
  a = AllReduceBenchOptions{};
  a.elements = 0;
  EXPECT_THROW(run_allreduce_bench(a, out), Error);
  std::fclose(out);
}

TEST_F(DpBench, NamesAMissingMpirun) {
  if (!MIXP_HAVE_MPI) GTEST_SKIP() << "built without MPI";
  std::ofstream(dir_ / "text.txt") << "a few words\n";
  DpBenchOptions o;
  o.data = (dir_ / "text.txt").string();
  o.out = (dir_ / "runs").string();
  o.mpirun = (dir_ / "no-mpirun").string();
  std::FILE* out = std::tmpfile();
  try {
    run_dp_bench(o, out);
    FAIL() << "no error";
  } catch (const Error& e) {
    EXPECT_NE(e.message().find(o.mpirun), std::string::npos) << e.message();
    EXPECT_NE(e.message().find("--mpirun"), std::string::npos) << e.message();
  }
  std::fclose(out);
}

// Runs a shell command; its exit status, and its stdout in `out`.
int shell(const std::string& command, std::string& out, const fs::path& dir) {
  const fs::path file = dir / "stdout";
  const int raw = std::system((command + " > '" + file.string() + "' 2>&1").c_str());
  out = test::slurp(file);
  return WIFEXITED(raw) ? WEXITSTATUS(raw) : -1;
}

json last_json_line(const std::string& text) {
  std::string last;
  size_t begin = 0;
  while (begin < text.size()) {
    const size_t end = std::min(text.find('\n', begin), text.size());
    if (end > begin && text[begin] == '{') last = text.substr(begin, end - begin);
    begin = end + 1;
  }
  return json::parse(last);
}

TEST_F(DpBench, AllReduceUnderMpirunPrintsOneLineOfItsFigures) {
  if (!MIXP_HAVE_MPI) GTEST_SKIP() << "built without MPI";
  std::string out;
  const int status =
      shell(std::string("'") + MIXP_MPIRUN + "' -np 2 --allow-run-as-root '" + MIXP_CLI_PATH +
                "' bench allreduce --elements 1001 --dtype bf16 " + "--reps 3",
            out, dir_);
  ASSERT_EQ(status, 0) << out;
  const json line = last_json_line(out);
  EXPECT_EQ(line["ranks"], 2);
  EXPECT_EQ(line["backend"], "mpi");
  EXPECT_EQ(line["dtype"], "bf16");
  EXPECT_EQ(line["elements"], 1001);
  EXPECT_EQ(line["bytes"], 2 * 1001);
  EXPECT_EQ(line["reps"], 3);
  EXPECT_GT(line["median_ms"].get<double>(), 0.0);
  EXPECT_LE(line["min_ms"].get<double>(), line["median_ms"].get<double>());
}

// The whole bench on a tiny gpt: it succeeds, and the figures it prints are those of the
// summaries its runs wrote.
TEST_F(DpBench, SmokeRunPrintsTheFiguresOfItsRunFolders) {
  if (!MIXP_HAVE_MPI) GTEST_SKIP() << "built without MPI";
  std::string text;
  for (int i = 0; text.size() < 40000; ++i)
    text += "In the beginning " + std::to_string(i * 7919 % 1000) + " the words were made.\n";
  std::ofstream(dir_ / "text.txt") << text;
  std::string out;
  const fs::path runs = dir_ / "runs";
  const int status =
      shell(std::string("'") + MIXP_CLI_PATH + "' bench dp --mpirun '" + MIXP_MPIRUN +
                "' --data '" + (dir_ / "text.txt").string() + "' --out '" + runs.string() +
                "' --layers 1 --heads 2 --width 32 --context 16 "
                "--batch-per-rank 4 --steps 3 --rounds 1 --bucket-mb 2,0.5 "
                "--allreduce-reps 3 --val-fraction 0.1",
            out, dir_);
  ASSERT_EQ(status, 0) << out;
  const json result = last_json_line(out);
  const fs::path round = runs / "round-1";
  const DpRunSummary one = read_dp_summary((round / "n1" / "summary.json").string());
  EXPECT_EQ(one.world_size, 1);
  EXPECT_DOUBLE_EQ(result["n1"]["median_step_ms"].get<double>(), one.median_step_ms);
  EXPECT_EQ(result["gradient_payload_bytes"].get<int64_t>(), gradient_payload_bytes(one.model));
  // The pair: two one-rank runs, the slower kept.
  const DpRunSummary pair0 = read_dp_summary((round / "pair-0" / "summary.json").string());
  const DpRunSummary pair1 = read_dp_summary((round / "pair-1" / "summary.json").string());
  EXPECT_EQ(pair0.world_size, 1);
  EXPECT_EQ(pair1.world_size, 1);
  const DpRunSummary& slower = pair0.median_step_ms >= pair1.median_step_ms ? pair0 : pair1;
  EXPECT_DOUBLE_EQ(result["pair"]["median_step_ms"].get<double>(), slower.median_step_ms);
  EXPECT_DOUBLE_EQ(result["pair"]["exposed_ms"].get<double>(),
                   slower.median_step_ms - one.median_step_ms);
  const std::vector<std::pair<std::string, std::string>> expected = {
      {"f32", "n2-f32-bucket-2"}, {"f32", "n2-f32-bucket-0.5"}, {"bf16", "n2-bf16-bucket-2"}};
  ASSERT_EQ(result["n2"].size(), expected.size()) << out;
  for (size_t i = 0; i < expected.size(); ++i) {
    SCOPED_TRACE(expected[i].second);
    const json& row = result["n2"][i];
    const DpRunSummary two =
        read_dp_summary((round / expected[i].second / "summary.json").string());
    EXPECT_EQ(two.world_size, 2);
    EXPECT_EQ(two.reduce_dtype, expected[i].first);
    EXPECT_EQ(row["reduce_dtype"], expected[i].first);
    EXPECT_DOUBLE_EQ(row["weak_scaling_efficiency"].get<double>(),
                     two.samples_per_s / 2 / one.samples_per_s);
    EXPECT_DOUBLE_EQ(row["exposed_ms"].get<double>(), two.median_step_ms - one.median_step_ms);
    EXPECT_DOUBLE_EQ(row["exposed_beyond_pair_ms"].get<double>(),
                     two.median_step_ms - slower.median_step_ms);
    EXPECT_EQ(row["bytes_sent_per_step"].get<int64_t>(), two.bytes_sent_per_step);
    const json allreduce =
        last_json_line(test::slurp(round / ("allreduce-" + expected[i].first + ".log")));
    EXPECT_EQ(allreduce["elements"].get<int64_t>(), gradient_payload_bytes(one.model) / 4);
    EXPECT_DOUBLE_EQ(row["standalone_allreduce_ms"].get<double>(),
                     allreduce["median_ms"].get<double>());
    EXPECT_DOUBLE_EQ(
        row["exposed_fraction"].get<double>(),
        (two.median_step_ms - one.median_step_ms) / allreduce["median_ms"].get<double>());
  }
  const DpRunSummary f32 = read_dp_summary((round / "n2-f32-bucket-2" / "summary.json").string());
  const DpRunSummary bf16 = read_dp_summary((round / "n2-bf16-bucket-2" / "summary.json").string());
  EXPECT_DOUBLE_EQ(result["bf16_over_f32_bytes"].get<double>(),
                   double(bf16.bytes_sent_per_step) / double(f32.bytes_sent_per_step));
  EXPECT_EQ(result["peak_memory_bytes"]["n1"]["total"].get<int64_t>(),
            one.peak_memory_bytes.at("total"));
  EXPECT_EQ(result["peak_memory_bytes"]["n2"]["total"].get<int64_t>(),
            f32.peak_memory_bytes.at("total"));
  // The table has a row for the baseline and one per two-rank run.
  EXPECT_NE(out.find("| N=1 (baseline) |"), std::string::npos) << out;
  EXPECT_NE(out.find("| 2 x N=1 at once, no communication |"), std::string::npos) << out;
  EXPECT_NE(out.find("| N=2 f32, 0.5 MiB buckets |"), std::string::npos) << out;
  EXPECT_NE(out.find("| N=2 bf16, 2 MiB buckets |"), std::string::npos) << out;
}

}  // namespace
}  // namespace mixp::bench
