// The mixp command line, run as a user runs it: files in, files out, exit statuses.
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <thread>

#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "cli/cli_fixture.h"
#include "dataset/files.h"
#include "mixp/amp/grad_scaler.h"
#include "mixp/cpu.h"
#include "mixp/io/checkpoint.h"
#include "mixp/io/safetensors.h"
#include "mixp/op_kind.h"
#include "mixp/runtime.h"
#include "support/scratch.h"
#include "support/vectors.h"

namespace mixp {
namespace {

namespace fs = std::filesystem;
using test::slurp;
using namespace cli_test;

std::string input_column(const test::VectorFile& file, int digits) {
  std::string s;
  char buf[16];
  for (const auto& line : file.lines) {
    std::snprintf(buf, sizeof buf, "%0*x\n", digits, line.in);
    s += buf;
  }
  return s;
}

std::string cli_name(const std::string& header_name) {
  if (header_name == "fp32") return "f32";
  if (header_name == "fp16") return "f16";
  return header_name;
}

TEST_F(Cli, ConvertPassesEveryVectorFileOnEveryIsa) {
  for (Isa isa : kAllIsas) {
    if (isa > best_isa()) break;
    for (const std::string& name : test::vector_file_names()) {
      const test::VectorFile file = test::read_vectors(name);
      const Format in = test::vector_format(file.in_name), out = test::vector_format(file.out_name);
      std::string args = std::string("--isa ") + name_of(isa) + " convert --from " +
                         cli_name(file.in_name) + " --to " + cli_name(file.out_name);
      if (file.op.ends_with("_sat")) args += " --saturate";
      const CliResult r = mixp(args, input_column(file, (in.total_bits() + 3) / 4));
      ASSERT_EQ(r.status, 0) << args << ": " << r.err;
      std::istringstream lines(r.out);
      std::string got;
      size_t i = 0, mismatches = 0;
      while (std::getline(lines, got)) {
        ASSERT_LT(i, file.lines.size()) << "too many output lines";
        ASSERT_EQ(got.size(), size_t((out.total_bits() + 3) / 4)) << "width of '" << got << "'";
        const uint32_t code = uint32_t(std::stoul(got, nullptr, 16));
        if (!test::output_matches(out, file.nan_rule, file.lines[i].expected, code)) ++mismatches;
        ++i;
      }
      EXPECT_EQ(i, file.lines.size()) << name;
      EXPECT_EQ(mismatches, 0u) << name << " on " << name_of(isa);
    }
  }
}

TEST_F(Cli, ConvertStreamsManyLinesInOrder) {
  // 300,000 lines: more than one read block and several conversion batches.
  std::string input;
  std::string expected;
  char buf[32];
  for (uint32_t i = 0; i < 300000; ++i) {
    const uint32_t bits = i * 2654435761u;
    std::snprintf(buf, sizeof buf, "%08x\n", bits);
    input += buf;
    std::snprintf(buf, sizeof buf, "%04x\n", unsigned(bfloat16(std::bit_cast<float>(bits)).bits));
    expected += buf;
  }
  const CliResult r = mixp("convert --from f32 --to bf16", input);
  ASSERT_EQ(r.status, 0) << r.err;
  EXPECT_TRUE(r.out == expected);
}

TEST_F(Cli, ConvertAcceptsCrlfUppercaseAndAMissingFinalNewline) {
  const CliResult r = mixp("convert --from f16 --to f32", "3C00\r\n0001\r\n7bff");
  ASSERT_EQ(r.status, 0) << r.err;
  EXPECT_EQ(r.out, "3f800000\n33800000\n477fe000\n");
}

TEST_F(Cli, ConvertBetweenAnyFormatsAndRoundings) {
  // f16 1.5 -> e2m1 is exact; f32 0.3 -> e2m1 rounds to 0.5 (code 1); 7.0 saturates to 6.
  CliResult r = mixp("convert --from f16 --to e2m1", "3e00\n");
  ASSERT_EQ(r.status, 0) << r.err;
  EXPECT_EQ(r.out, "3\n");
  r = mixp("convert --from f32 --to e2m1", "3e99999a\n40e00000\n");
  ASSERT_EQ(r.status, 0) << r.err;
  EXPECT_EQ(r.out, "1\n7\n");
  // toward_zero to bf16 truncates: 0x3f80ffff -> 3f80.
  r = mixp("convert --from f32 --to bf16 --rounding toward_zero", "3f80ffff\n");
  EXPECT_EQ(r.out, "3f80\n");
  // f16 saturation goes through the emulator.
  r = mixp("convert --from f32 --to f16 --saturate", "7f800000\n");
  EXPECT_EQ(r.out, "7bff\n");
  // Stochastic rounding is reproducible for a seed.
  const CliResult a =
      mixp("convert --from f32 --to bf16 --rounding stochastic --seed 3", "3f800001\n3f80ff00\n");
  const CliResult b =
      mixp("convert --from f32 --to bf16 --rounding stochastic --seed 3", "3f800001\n3f80ff00\n");
  EXPECT_EQ(a.status, 0) << a.err;
  EXPECT_EQ(a.out, b.out);
}

TEST_F(Cli, BadInputNamesTheLineAndExitsWithTwo) {
  struct Case {
    std::string args, input, message;
  };
  const Case cases[] = {
      {"convert --from f32 --to f16", "3f800000\nzz800000\n", "line 2"},
      {"convert --from f32 --to f16", "3f800000\n3f8000\n", "line 2"},
      {"convert --from f16 --to f32", "3c00\n\n3c00\n", "line 2: empty line"},
      {"convert --from e4m3 --to f32", "38\n380\n", "has 3 characters"},
      {"convert --from e3m2 --to f32", "7f\n", "more than the 6 bits"},
      {"convert --from f32 --to e2m1", "3f800000\n7fc00000\n", "line 2: encode: NaN"},
      {"convert --from f32 --to fp7", "3f800000\n", "unknown format 'fp7'"},
      {"convert --from f32", "", "--to"},
      {"convert --from f32 --to f16 --rounding sideways", "", "unknown rounding"},
      {"--isa sse9 convert --from f32 --to f16", "", "unknown ISA"},
      {"frobnicate", "", ""},
  };
  for (const Case& c : cases) {
    const CliResult r = mixp(c.args, c.input);
    EXPECT_EQ(r.status, 2) << c.args;
    EXPECT_NE(r.err.find(c.message), std::string::npos) << c.args << ": " << r.err;
  }
  // The lines before the bad one are converted.
  const CliResult r = mixp("convert --from f32 --to f16", "3f800000\n40000000\nbad\n");
  EXPECT_EQ(r.out, "3c00\n4000\n");
}

// A loss-scaling trace of tests/data/vectors/traces: the command's options from the params
// line, its input (the found_inf column) and its expected output (scale_before_hex applied).
struct TraceCase {
  std::string args, input, expected;
  size_t steps = 0;
};

TraceCase read_trace_case(const std::string& name) {
  const std::string path = test::vectors_dir() + "/traces/" + name;
  std::ifstream in(path);
  EXPECT_TRUE(in.good()) << "cannot open " << path;
  TraceCase c;
  std::string line;
  auto param = [&](const std::string& params, const std::string& key) {
    const size_t at = params.find(key + "=");
    EXPECT_NE(at, std::string::npos) << path << ": no " << key;
    const size_t begin = at + key.size() + 1;
    return params.substr(begin, params.find(' ', begin) - begin);
  };
  while (std::getline(in, line)) {
    if (line.empty()) continue;
    if (line.starts_with("# params: ")) {
      c.args = "scaler-trace --init " + param(line, "init_scale") + " --growth " +
               param(line, "growth_factor") + " --backoff " + param(line, "backoff_factor") +
               " --interval " + param(line, "growth_interval");
    }
    if (line[0] == '#') continue;
    std::istringstream fields(line);
    std::string step, found, before, applied;
    fields >> step >> found >> before >> applied;
    c.input += found + "\n";
    c.expected += before + " " + applied + "\n";
    ++c.steps;
  }
  return c;
}

TEST_F(Cli, ScalerTracePassesEveryTraceFile) {
  for (const char* name :
       {"scaler_default_clean.txt", "scaler_default_mixed.txt", "scaler_gi5_bursts_10000.txt",
        "scaler_gi1_cap.txt", "scaler_underflow_to_zero.txt", "scaler_nonpow2_factors.txt"}) {
    const TraceCase c = read_trace_case(name);
    ASSERT_GT(c.steps, 0u) << name;
    const CliResult r = mixp(c.args, c.input);
    ASSERT_EQ(r.status, 0) << c.args << ": " << r.err;
    EXPECT_TRUE(r.out == c.expected) << name;
    if (r.out != c.expected) {
      std::istringstream got(r.out), want(c.expected);
      std::string g, w;
      for (size_t i = 0; std::getline(want, w); ++i) {
        if (!std::getline(got, g) || g != w) {
          ADD_FAILURE() << name << " line " << i + 1 << ": got '" << g << "', expected '" << w
                        << "'";
          break;
        }
      }
    }
  }
}

TEST_F(Cli, ScalerTraceStreamsMillionsOfLinesThroughTheLibrarysRule) {
  // 2,000,000 steps with bursts: the output must be the library's update_scale, line by line.
  amp::GradScalerOptions options;
  options.growth_interval = 50;
  amp::ScaleState state;
  state.scale = float(options.init_scale);
  std::string input, expected;
  input.reserve(4000000);
  expected.reserve(22000000);
  uint64_t x = 12345;
  char buf[32];
  for (int i = 0; i < 2000000; ++i) {
    x = x * 6364136223846793005ull + 1442695040888963407ull;
    const bool found = (x >> 33) % 97 == 0 || (i % 100000 < 3);
    input += found ? "1\n" : "0\n";
    std::snprintf(buf, sizeof buf, "%08x %d\n", unsigned(std::bit_cast<uint32_t>(state.scale)),
                  found ? 0 : 1);
    expected += buf;
    amp::update_scale(state, options, found);
  }
  const CliResult r = mixp("scaler-trace --interval 50", input);
  ASSERT_EQ(r.status, 0) << r.err;
  EXPECT_TRUE(r.out == expected);
}

TEST_F(Cli, ScalerTraceDefaultsAndLineEndings) {
  // PyTorch's defaults; CRLF and a missing final newline are accepted.
  const CliResult r = mixp("scaler-trace", "1\r\n0\r\n1");
  ASSERT_EQ(r.status, 0) << r.err;
  EXPECT_EQ(r.out, "47800000 0\n47000000 1\n47000000 0\n");
}

TEST_F(Cli, ScalerTraceRejectsBadLinesAndOptions) {
  struct Case {
    std::string args, input, message;
  };
  const Case cases[] = {
      {"scaler-trace", "0\n1\n2\n", "line 3"},
      {"scaler-trace", "0\n\n1\n", "line 2: empty line"},
      {"scaler-trace", "0\n 1\n", "line 2"},
      {"scaler-trace", "01\n", "line 1"},
      {"scaler-trace", "true\n", "line 1"},
      {"scaler-trace --init 0", "0\n", "--init"},
      {"scaler-trace --init -5", "0\n", "--init"},
      {"scaler-trace --init 1e39", "0\n", "--init"},
      {"scaler-trace --growth 1", "0\n", "--growth"},
      {"scaler-trace --growth 0.5", "0\n", "--growth"},
      {"scaler-trace --backoff 1", "0\n", "--backoff"},
      {"scaler-trace --backoff 0", "0\n", "--backoff"},
      {"scaler-trace --interval 0", "0\n", "--interval"},
      {"scaler-trace --interval 2.5", "0\n", "--interval"},
      {"scaler-trace --init abc", "0\n", "--init"},
  };
  for (const Case& c : cases) {
    const CliResult r = mixp(c.args, c.input);
    EXPECT_EQ(r.status, 2) << c.args << " < " << c.input;
    EXPECT_NE(r.err.find(c.message), std::string::npos) << c.args << ": " << r.err;
  }
  // The steps before the bad line are written.
  const CliResult r = mixp("scaler-trace", "0\n1\nx\n");
  EXPECT_EQ(r.status, 2);
  EXPECT_EQ(r.out, "47800000 1\n47800000 0\n");
}

TEST_F(Cli, FormatsPrintsEveryFormat) {
  const CliResult r = mixp("formats");
  ASSERT_EQ(r.status, 0) << r.err;
  for (const char* name : {"f64", "f32", "f16", "bf16", "e4m3", "e5m2", "e3m2", "e2m3", "e2m1"}) {
    EXPECT_NE(r.out.find(std::string("\n") + name + " "), std::string::npos) << name;
  }
  EXPECT_NE(r.out.find("65504"), std::string::npos);
  EXPECT_NE(r.out.find("448"), std::string::npos);
  EXPECT_NE(r.out.find("57344"), std::string::npos);
}

TEST_F(Cli, AmpPolicyPrintsEveryOp) {
  const CliResult r = mixp("amp policy");
  ASSERT_EQ(r.status, 0) << r.err;
  for (const OpInfo& op : all_ops()) {
    // "\n<name> <spaces><policy> "
    const size_t at = r.out.find(std::string("\n") + op.name + " ");
    ASSERT_NE(at, std::string::npos) << op.name << "\n" << r.out;
    const std::string line = r.out.substr(at + 1, r.out.find('\n', at + 1) - at - 1);
    EXPECT_NE(line.find(std::string(" ") + name_of(op.policy) + " "), std::string::npos) << line;
  }
  EXPECT_NE(r.out.find("input dtype (computed in f32)"), std::string::npos);
  EXPECT_EQ(mixp("amp").status, 2);  // a subcommand is required
}

TEST_F(Cli, OpenMPWorkersOfTheCliSleepWhenIdle) {
  // This test process limited spinning itself (it links mixp), so GOMP_SPINCOUNT is in its
  // environment; the child must start without it to show that the CLI sets it on its own.
  if (!openmp_spin_limited()) GTEST_SKIP() << "the environment already sets the OpenMP wait policy";
  const std::string saved = std::getenv("GOMP_SPINCOUNT");
  ::unsetenv("GOMP_SPINCOUNT");
  ::setenv("OMP_DISPLAY_ENV", "verbose", 1);
  const CliResult shown = mixp("formats", "");  // libgomp prints what it parsed at start-up
  ::unsetenv("OMP_DISPLAY_ENV");
  ::setenv("GOMP_SPINCOUNT", saved.c_str(), 1);
  ASSERT_EQ(shown.status, 0);
  EXPECT_NE(shown.err.find("GOMP_SPINCOUNT = '0'"), std::string::npos) << shown.err;
}

TEST_F(Cli, HelpExitsWithZero) {
  const CliResult r = mixp("--help");
  EXPECT_EQ(r.status, 0);
  EXPECT_NE(r.out.find("convert"), std::string::npos);
}

// ---- train and compare: argument errors, found before any model or data is loaded ----

TEST_F(Cli, TrainArgumentErrorsExitWithStatus2AndAMessage) {
  struct Case {
    std::string args, message;
  };
  const std::vector<Case> cases = {
      {"train", "--model"},
      {"train --model cnn --epochs 1 --steps 5", "excludes"},
      {"train --model resnet", "unknown model 'resnet'"},
      {"train --model cnn --precision fp33", "fp33"},
      {"train --model cnn --precision bf16 --optimizer-state f16", "--optimizer-state"},
      {"train --model cnn --steps 0", "--steps must be at least 1"},
      {"train --model cnn --batch -3", "--batch"},
      {"train --model cnn --data /nonexistent/mixp", "no IDX data set at /nonexistent/mixp"},
      {"train --model gpt --data /nonexistent/kjv.txt", "no text at /nonexistent/kjv.txt"},
      {"compare --model cnn", "--precisions"},
      {"compare --model cnn --precisions fp32,nope", "nope"},
      {"compare --model cnn --precisions fp32,,bf16", "empty name"},
  };
  for (const Case& c : cases) {
    const CliResult r = mixp(c.args + " --out '" + (dir_ / "run").string() + "'");
    EXPECT_EQ(r.status, 2) << c.args << ": " << r.err;
    EXPECT_NE(r.err.find(c.message), std::string::npos)
        << c.args << ": expected '" << c.message << "' in: " << r.err;
    EXPECT_FALSE(fs::exists(dir_ / "run")) << c.args << ": nothing is written";
  }
}

TEST_F(Cli, TrainHelpListsTheFlags) {
  const CliResult r = mixp("train --help");
  EXPECT_EQ(r.status, 0) << r.err;
  for (const char* flag :
       {"--model", "--data", "--precision", "--epochs", "--steps", "--batch", "--lr", "--seed",
        "--threads", "--out", "--layers", "--heads", "--width", "--context", "--optimizer-state"})
    EXPECT_NE(r.out.find(flag), std::string::npos) << flag;
}

}  // namespace
}  // namespace mixp

// ---- end to end: the real models on real (or generated) data, a few steps each ----

namespace mixp {
namespace {

using namespace cli_test;

TEST_F(Cli, TrainsTheCnnOnFashionMnistInAFewSteps) {
  if (!fs::exists("/usr/share/datasets/fashion-mnist/train-images-idx3-ubyte.gz")) {
    GTEST_SKIP() << "dataset-fashion-mnist is not installed";
  }
  const fs::path out = dir_ / "cnn";
  const CliResult r =
      mixp("train --model cnn --precision amp-bf16 --steps 60 --out '" + out.string() + "'");
  ASSERT_EQ(r.status, 0) << r.err;
  for (const char* f : {"metrics.jsonl", "summary.json", "model.safetensors", "loss.svg"}) {
    EXPECT_TRUE(fs::exists(out / f)) << f;
  }
  const std::string summary = slurp(out / "summary.json");
  // 60 steps of 64 images reach well above chance (10%) on the 10,000 test images.
  EXPECT_GT(json_number(summary, "test_accuracy"), 0.6) << summary;
  EXPECT_EQ(json_number(summary, "steps"), 60.0);
}

TEST_F(Cli, TrainsTheLanguageModelsOnAText) {
  const fs::path text = dir_ / "corpus.txt";
  std::ofstream(text) << repeated_text(40000);
  for (const std::string model : {"gpt", "lstm"}) {
    const fs::path out = dir_ / model;
    const CliResult r = mixp("train --model " + model + " --data '" + text.string() +
                             "' --precision amp-fp16 --steps 40 --layers 2 --heads 2 --width 32 "
                             "--context 32 --lr 3e-3 --out '" +
                             out.string() + "'");
    ASSERT_EQ(r.status, 0) << model << ": " << r.err;
    const std::string summary = slurp(out / "summary.json");
    const double loss = json_number(summary, "final_eval_loss");
    // The corpus has 18 distinct characters: a model that learned nothing scores ln 18 = 2.89.
    EXPECT_LT(loss, 2.5) << model << ": " << summary;
    EXPECT_NEAR(json_number(summary, "bits_per_char"), loss / std::log(2.0), 1e-9) << model;
  }
}

TEST_F(Cli, InspectDeepMlpPrintsTheTableAndWritesJsonAndSvg) {
  const fs::path out = dir_ / "inspect";
  const CliResult r =
      mixp("inspect --model deep-mlp --precision amp-fp16 --steps 0 --formats e3m2,e6m9 --out '" +
           out.string() + "'");
  ASSERT_EQ(r.status, 0) << r.err;
  for (const char* layer : {"fc1", "fc2", "fc3", "all"})
    EXPECT_NE(r.out.find(std::string("\n") + layer + " "), std::string::npos) << layer << r.out;
  EXPECT_NE(r.out.find("loss scale 65536 (2^16)"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("keep in higher precision"), std::string::npos) << r.out;
  const std::string json = slurp(out / "inspect.json");
  EXPECT_EQ(json_number(json, "loss_scale"), 65536.0);
  // The extra formats are asked of every tensor too.
  EXPECT_NE(json.find("\"format\": \"e3m2\""), std::string::npos);
  EXPECT_NE(json.find("\"format\": \"e6m9\""), std::string::npos);
  const std::string svg = slurp(out / "activation_gradients.svg");
  EXPECT_NE(svg.find("<rect class=\"bar\""), std::string::npos);
  EXPECT_NE(svg.find("become zero in f16"), std::string::npos);
  for (const char* layer : {"fc1", "fc2", "fc3"})
    EXPECT_TRUE(fs::exists(out / "layers" / (std::string(layer) + ".svg"))) << layer;
  // Without --block-formats, no block scales anywhere.
  EXPECT_EQ(r.out.find("block scales"), std::string::npos) << r.out;
  EXPECT_EQ(json.find("block_scales"), std::string::npos);
  EXPECT_FALSE(fs::exists(out / "block_scales.csv"));
}

TEST_F(Cli, InspectsALanguageModelAndRejectsBadFlags) {
  const fs::path text = dir_ / "corpus.txt";
  std::ofstream(text) << repeated_text(20000);
  const fs::path out = dir_ / "gpt";
  const CliResult r = mixp("inspect --model gpt --data '" + text.string() +
                           "' --precision amp-bf16 --steps 2 --every 1 --layers 1 --heads 2 "
                           "--width 16 --context 16 --out '" +
                           out.string() + "'");
  ASSERT_EQ(r.status, 0) << r.err;
  // Every layer with parameters of its own, by its nanoGPT name.
  for (const char* layer :
       {"transformer.wte", "transformer.wpe", "transformer.h.0.ln_1", "transformer.h.0.attn.c_attn",
        "transformer.h.0.mlp.c_proj", "transformer.ln_f"})
    EXPECT_NE(r.out.find(std::string("\n") + layer + " "), std::string::npos) << layer << r.out;
  EXPECT_NE(r.out.find("loss scale 1 (2^0)"), std::string::npos) << "amp-bf16 does not scale";
  EXPECT_TRUE(fs::exists(out / "layers" / "transformer.h.0.attn.c_attn.svg"));

  for (const auto& [args, message] : std::vector<std::pair<std::string, std::string>>{
           {"inspect", "--model"},
           {"inspect --model resnet", "unknown model 'resnet'"},
           {"inspect --model deep-mlp --steps -1", "--steps must be at least 0"},
           {"inspect --model deep-mlp --every 0", "--every must be at least 1"},
           {"inspect --model deep-mlp --precision fp33", "fp33"},
           {"inspect --model deep-mlp --data x", "takes no --data"},
           {"inspect --model deep-mlp --formats e3m2,,e2m1", "empty name"},
           {"inspect --model deep-mlp --formats e9m30", "e9m30"}}) {
    const CliResult bad = mixp(args + " --out '" + (dir_ / "bad").string() + "'");
    EXPECT_EQ(bad.status, 2) << args;
    EXPECT_NE(bad.err.find(message), std::string::npos) << args << ": " << bad.err;
  }
}

// One line of block_scales.csv by its header's names.
std::map<std::string, std::string> csv_row(const std::vector<std::string>& header,
                                           const std::string& line) {
  std::map<std::string, std::string> row;
  std::stringstream fields(line);
  std::string field;
  for (size_t i = 0; std::getline(fields, field, ','); ++i) {
    EXPECT_LT(i, header.size()) << line;
    if (i < header.size()) row[header[i]] = field;
  }
  EXPECT_EQ(row.size(), header.size()) << line;
  return row;
}

TEST_F(Cli, InspectBlockFormatsReportsEveryLinearLayerInEachPresetsBlocks) {
  const fs::path text = dir_ / "corpus.txt";
  std::ofstream(text) << repeated_text(20000);
  const fs::path out = dir_ / "gpt";
  // Width 24: neither a multiple of 32 nor of 128, so the last block of every row is partial.
  const int64_t width = 24, batch = 4, context = 16, tokens = batch * context;
  const CliResult r = mixp("inspect --model gpt --data '" + text.string() +
                           "' --precision amp-bf16 --steps 2 --layers 1 --heads 2 --width 24 "
                           "--context 16 --batch 4 --block-formats nvfp4,mxfp4,mxfp8,fp8-block "
                           "--out '" +
                           out.string() + "'");
  ASSERT_EQ(r.status, 0) << r.err;
  for (const char* column : {"layer", "computes", "tensor", "block", "blocks", "log2 min", "median",
                             "max", "spread", "saturated", "flushed", "zeroed", "rms err"})
    EXPECT_NE(r.out.find(column), std::string::npos) << column << r.out;
  for (const char* preset : {"nvfp4", "mxfp4", "mxfp8", "fp8-block"})
    EXPECT_NE(r.out.find(std::string("block scales under ") + preset + " ("), std::string::npos)
        << preset << r.out;
  EXPECT_NE(slurp(out / "inspect.json").find("\"block_scales\""), std::string::npos);

  // Each Linear layer's [in, out], and its tensors' [rows, cols] under y = x W^T.
  const std::map<std::string, std::pair<int64_t, int64_t>> linear = {
      {"transformer.h.0.attn.c_attn", {width, 3 * width}},
      {"transformer.h.0.attn.c_proj", {width, width}},
      {"transformer.h.0.mlp.c_fc", {width, 4 * width}},
      {"transformer.h.0.mlp.c_proj", {4 * width, width}}};
  // Each preset's blocks: {1 x block of inputs and gradients, square weight tiles or not}.
  const std::map<std::string, std::pair<int64_t, bool>> blocks_of = {{"nvfp4", {16, true}},
                                                                     {"mxfp4", {32, true}},
                                                                     {"mxfp8", {32, false}},
                                                                     {"fp8-block", {128, true}}};
  std::ifstream csv(out / "block_scales.csv");
  std::string line;
  ASSERT_TRUE(std::getline(csv, line));
  std::vector<std::string> header;
  for (std::stringstream h(line); std::getline(h, line, ',');) header.push_back(line);
  std::map<std::string, int> rows_per_preset;
  while (std::getline(csv, line)) {
    std::map<std::string, std::string> row = csv_row(header, line);
    const std::string preset = row["preset"], layer = row["layer"], tensor = row["tensor"];
    SCOPED_TRACE(line);
    ASSERT_TRUE(blocks_of.count(preset) && linear.count(layer));
    ++rows_per_preset[preset];
    const auto [in, out_features] = linear.at(layer);
    const auto [block, square] = blocks_of.at(preset);
    int64_t rows = tokens, cols = in, block_rows = 1;
    if (tensor == "weight") {
      rows = out_features;
      block_rows = square ? block : 1;
    } else if (tensor == "output_gradient") {
      cols = out_features;
    } else {
      ASSERT_EQ(tensor, "input");
    }
    auto number = [&](const char* key) { return std::stod(row.at(key)); };
    EXPECT_EQ(number("block_rows"), block_rows);
    EXPECT_EQ(number("block_cols"), block);
    const double blocks = number("blocks");
    EXPECT_EQ(blocks,
              double(((rows + block_rows - 1) / block_rows) * ((cols + block - 1) / block)));
    for (const char* f : {"saturated_fraction", "flushed_fraction", "flushed_element_fraction"}) {
      EXPECT_GE(number(f), 0.0) << f;
      EXPECT_LE(number(f), 1.0) << f;
    }
    EXPECT_DOUBLE_EQ(number("saturated_fraction"), number("saturated_blocks") / blocks);
    EXPECT_DOUBLE_EQ(number("flushed_fraction"), number("flushed_blocks") / blocks);
    EXPECT_LE(number("zero_blocks") + number("non_finite_blocks") + number("scaled_blocks"),
              blocks);
    EXPECT_LE(number("flushed_elements"), number("nonzero_elements"));
    EXPECT_LE(number("nonzero_elements"), double(rows * cols));
    EXPECT_GT(number("scaled_blocks"), 0.0);
    EXPECT_LE(number("log2_scale_min"), number("log2_scale_median"));
    EXPECT_LE(number("log2_scale_median"), number("log2_scale_max"));
    EXPECT_DOUBLE_EQ(number("log2_scale_spread"),
                     number("log2_scale_max") - number("log2_scale_min"));
    // Quantizing to 4 or 8 bits loses something, and far less than everything.
    EXPECT_GT(number("relative_rms_error"), 0.0);
    EXPECT_LT(number("relative_rms_error"), 1.0);
    // The RMS of the relative errors, weighted by |bf16(x)|^2, is at most their maximum (up to
    // the rounding of its square root).
    EXPECT_LE(number("relative_rms_error"), number("max_relative_error") * (1 + 0x1p-50));
    // The FP4 recipes keep the last ceil(15% of 4) = 1 Linear layer in bf16.
    const bool fp4 = preset == "nvfp4" || preset == "mxfp4";
    EXPECT_EQ(row["computes"], fp4 && layer == "transformer.h.0.mlp.c_proj" ? "bf16" : preset);
  }
  for (const auto& [preset, blocks] : blocks_of)
    EXPECT_EQ(rows_per_preset[preset], 4 * 3) << preset;

  for (const auto& [args, message] : std::vector<std::pair<std::string, std::string>>{
           {"--block-formats fp8", "'fp8' has no block scales"},
           {"--block-formats nvfp4,,mxfp4", "empty name"},
           {"--block-formats nvfp5", "nvfp5"}}) {
    const CliResult bad = mixp("inspect --model deep-mlp --steps 0 " + args + " --out '" +
                               (dir_ / "bad").string() + "'");
    EXPECT_EQ(bad.status, 2) << args;
    EXPECT_NE(bad.err.find(message), std::string::npos) << args << ": " << bad.err;
  }
}

TEST_F(Cli, TrainsTheDeepMlpOnItsSyntheticRegression) {
  const fs::path out = dir_ / "deep";
  // AdamW moves every weight by about lr per step: the targets are about 1e-4, so lr is tiny.
  const CliResult r = mixp(
      "train --model deep-mlp --precision fp32 --steps 30 --lr 1e-5 "
      "--eval-interval 1 --out '" +
      out.string() + "'");
  ASSERT_EQ(r.status, 0) << r.err;
  const std::string summary = slurp(out / "summary.json");
  EXPECT_NE(summary.find("\"regression\""), std::string::npos) << summary;
  EXPECT_NE(summary.find("\"bits_per_char\": null"), std::string::npos) << summary;
  // The first evaluation (after one step) against the last: the error falls by more than half.
  const size_t at = summary.find("\"loss\": ", summary.find("\"evals\""));
  ASSERT_NE(at, std::string::npos) << summary;
  const double first = std::strtod(summary.c_str() + at + 8, nullptr);
  EXPECT_LT(json_number(summary, "final_eval_loss"), 0.5 * first) << summary;
  EXPECT_NE(slurp(out / "loss.svg").find("mean squared error"), std::string::npos);
}

// --optimizer-state reaches AdamW: the bf16 preset keeps bf16 moments unless told otherwise,
// the summary says which, and a resumed run keeps its own and refuses the other.
TEST_F(Cli, OptimizerStateChoosesTheMomentsAndIsPartOfTheRun) {
  auto run = [&](const std::string& flags, const fs::path& out) {
    const CliResult r =
        mixp("train --model deep-mlp --precision bf16 --steps 4 --lr 1e-5 --checkpoint-every 2 " +
             flags + " --out '" + out.string() + "'");
    EXPECT_EQ(r.status, 0) << r.err;
    return slurp(out / "summary.json");
  };
  const std::string preset = run("", dir_ / "preset");
  EXPECT_NE(preset.find("\"optimizer_state\": \"bf16\""), std::string::npos) << preset;
  const std::string wide = run("--optimizer-state f32", dir_ / "wide");
  EXPECT_NE(wide.find("\"optimizer_state\": \"f32\""), std::string::npos) << wide;
  // bf16 moments take half the bytes of f32 ones (peak_memory_bytes' optimizer_state, the
  // key's last occurrence).
  EXPECT_GT(json_number(wide, "optimizer_state"), 0.0) << wide;
  EXPECT_EQ(2 * json_number(preset, "optimizer_state"), json_number(wide, "optimizer_state"));

  const CliResult other =
      mixp("train --resume '" + (dir_ / "wide").string() + "' --optimizer-state bf16");
  EXPECT_EQ(other.status, 2);
  EXPECT_NE(other.err.find("--optimizer-state bf16 differs from the run's f32"), std::string::npos)
      << other.err;
  const CliResult same = mixp("train --resume '" + (dir_ / "wide").string() + "'");
  EXPECT_EQ(same.status, 0) << same.err;
}

// --mx-scale-rounding is part of the run: stored in run.json (up by default), kept by a resumed
// run, which refuses the other rule, and taken by eval, which refuses an unknown one.
TEST_F(Cli, MxScaleRoundingIsPartOfTheRun) {
  auto train = [&](const std::string& flags, const fs::path& out) {
    const CliResult r = mixp(
        "train --model deep-mlp --precision mxfp8 --steps 2 "
        "--checkpoint-every 2 " +
        flags + " --out '" + out.string() + "'");
    EXPECT_EQ(r.status, 0) << r.err;
    return slurp(out / "run.json");
  };
  EXPECT_NE(train("", dir_ / "up").find("\"mx_scale_rounding\": \"up\""), std::string::npos);
  EXPECT_NE(
      train("--mx-scale-rounding floor", dir_ / "floor").find("\"mx_scale_rounding\": \"floor\""),
      std::string::npos);
  const CliResult other =
      mixp("train --resume '" + (dir_ / "floor").string() + "' --mx-scale-rounding up");
  EXPECT_EQ(other.status, 2);
  EXPECT_NE(other.err.find("--mx-scale-rounding up differs from the run's floor"),
            std::string::npos)
      << other.err;
  const CliResult eval =
      mixp("eval '" + (dir_ / "floor").string() + "' --mx-scale-rounding up --precision mxfp8");
  EXPECT_EQ(eval.status, 0) << eval.err;
  const CliResult bad = mixp("eval '" + (dir_ / "floor").string() + "' --mx-scale-rounding ceil");
  EXPECT_EQ(bad.status, 2);
  EXPECT_NE(bad.err.find("--mx-scale-rounding"), std::string::npos) << bad.err;
}

// --fp4-without is part of the run: stored in run.json, kept by a resumed run, which refuses
// another list; an unknown ingredient and an ablation of a preset without FP4 are refused.
TEST_F(Cli, Fp4WithoutIsPartOfTheRun) {
  const fs::path out = dir_ / "ablated";
  const CliResult r = mixp(
      "train --model deep-mlp --precision nvfp4 --steps 2 --checkpoint-every 2 "
      "--fp4-without sr,hadamard --out '" +
      out.string() + "'");
  ASSERT_EQ(r.status, 0) << r.err;
  EXPECT_NE(slurp(out / "run.json").find("\"fp4_without\": \"hadamard,sr\""), std::string::npos);
  const CliResult same = mixp("train --resume '" + out.string() + "' --fp4-without hadamard,sr");
  EXPECT_EQ(same.status, 0) << same.err;
  const CliResult other = mixp("train --resume '" + out.string() + "' --fp4-without sr");
  EXPECT_EQ(other.status, 2);
  EXPECT_NE(other.err.find("--fp4-without sr differs from the run's hadamard,sr"),
            std::string::npos)
      << other.err;
  const CliResult unknown =
      mixp("train --model deep-mlp --precision nvfp4 --steps 1 --fp4-without rht --out '" +
           (dir_ / "u").string() + "'");
  EXPECT_EQ(unknown.status, 2);
  EXPECT_NE(unknown.err.find("unknown FP4 ingredient 'rht'"), std::string::npos) << unknown.err;
  const CliResult no_fp4 =
      mixp("train --model deep-mlp --precision fp8 --steps 1 --fp4-without sr --out '" +
           (dir_ / "n").string() + "'");
  EXPECT_EQ(no_fp4.status, 2);
  EXPECT_NE(no_fp4.err.find("has no FP4 recipe"), std::string::npos) << no_fp4.err;
}

// mixp inspect under auto-fp4 shows each Linear layer's format after its training steps and
// the share of the Linear FLOPs that ran in each format.
TEST_F(Cli, InspectShowsAdaptivePrecision) {
  const CliResult r = mixp("inspect --model deep-mlp --precision auto-fp4 --steps 3 --out '" +
                           (dir_ / "inspect").string() + "'");
  ASSERT_EQ(r.status, 0) << r.err;
  EXPECT_NE(r.out.find("adaptive precision after 3 steps:"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find(": fp4\n"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("Linear FLOPs: bf16 "), std::string::npos) << r.out;
}

// --underflow-growth reaches GradScalerOptions::underflow_fraction: on the deep narrow model,
// whose gradients flush in fp16 even at 2^16, the scale grows (until the counted weight
// gradients flush less than the fraction), while the fixed interval of 2000 steps leaves it
// where it started. The setting is part of the run: a
// resume keeps it and refuses another value.
TEST_F(Cli, UnderflowGrowthGrowsTheLossScaleOfTheDeepMlp) {
  auto final_scale = [&](const std::string& flags, const fs::path& out) {
    const CliResult r = mixp("train --model deep-mlp --precision amp-fp16 --steps 6 --lr 1e-5 " +
                             flags + " --out '" + out.string() + "'");
    EXPECT_EQ(r.status, 0) << r.err;
    return json_number(slurp(out / "summary.json"), "final_loss_scale");
  };
  const double fixed = final_scale("", dir_ / "fixed");
  EXPECT_EQ(fixed, 65536.0);
  const double aware = final_scale("--underflow-growth 0.01 --checkpoint-every 3", dir_ / "aware");
  EXPECT_GE(aware, 2 * fixed);

  const CliResult other =
      mixp("train --resume '" + (dir_ / "aware").string() + "' --underflow-growth 0.5");
  EXPECT_EQ(other.status, 2);
  EXPECT_NE(other.err.find("--underflow-growth 0.5 differs from the run's 0.01"), std::string::npos)
      << other.err;
  const CliResult bad = mixp(
      "train --model deep-mlp --precision amp-fp16 --steps 1 "
      "--underflow-growth 1.5 --out '" +
      (dir_ / "bad").string() + "'");
  EXPECT_EQ(bad.status, 2);
  EXPECT_NE(bad.err.find("--underflow-growth must be in [0, 1), got 1.5"), std::string::npos)
      << bad.err;
}

TEST_F(Cli, BadDataGetsAMessageNamingTheFileAndStatus2) {
  const fs::path images = dir_ / "idx";
  fs::create_directories(images);
  for (const char* f : {"train-images-idx3-ubyte", "train-labels-idx1-ubyte",
                        "t10k-images-idx3-ubyte", "t10k-labels-idx1-ubyte"}) {
    std::ofstream(images / f, std::ios::binary) << std::string("\x00\x00\x09\x03garbage", 11);
  }
  CliResult r = mixp("train --model cnn --steps 1 --data '" + images.string() + "' --out '" +
                     (dir_ / "o1").string() + "'");
  EXPECT_EQ(r.status, 2);
  EXPECT_NE(r.err.find("train-images-idx3-ubyte"), std::string::npos) << r.err;
  const fs::path empty = dir_ / "empty.txt";
  std::ofstream(empty) << "";
  r = mixp("train --model gpt --steps 1 --data '" + empty.string() + "' --out '" +
           (dir_ / "o2").string() + "'");
  EXPECT_EQ(r.status, 2);
  EXPECT_NE(r.err.find("empty.txt"), std::string::npos) << r.err;
  r = mixp("train --model cnn --steps 1 --data '" + (dir_ / "missing").string() + "'");
  EXPECT_EQ(r.status, 2);
  EXPECT_NE(r.err.find("missing"), std::string::npos) << r.err;
}

// Checkpoints from outside: a training process killed with SIGKILL (or stopped with SIGTERM)
// and continued with --resume ends with a model.safetensors bitwise the uninterrupted run's.
class CliCheckpoint : public Cli {
 protected:
  std::string train_args(const fs::path& out) {
    const fs::path text = dir_ / "corpus.txt";
    if (!fs::exists(text)) std::ofstream(text) << repeated_text(40000);
    return "train --model gpt --data '" + text.string() +
           "' --precision amp-fp16 --steps 1500 --layers 1 --heads 2 --width 16 --context 16 "
           "--threads 1 --checkpoint-every 50 --out '" +
           out.string() + "'";
  }
  // Waits until `dir` holds a checkpoint; false if the process ended first.
  static bool wait_for_checkpoint(const fs::path& dir, pid_t pid) {
    for (int i = 0; i < 60000; ++i) {
      if (!io::list_checkpoints(dir.string()).empty()) return true;
      int status = 0;
      if (::waitpid(pid, &status, WNOHANG) == pid) return false;
      std::this_thread::sleep_for(std::chrono::milliseconds(1));
    }
    return false;
  }
};

TEST_F(CliCheckpoint, SigkilledAndResumedEndsBitwiseAsTheStraightRun) {
  const fs::path straight = dir_ / "straight", killed = dir_ / "killed";
  // The killed run is spawn()ed on the fast kernels: so are the two it is compared with.
  CliResult r = mixp_fast(train_args(straight));
  ASSERT_EQ(r.status, 0) << r.err;
  const pid_t pid = spawn(train_args(killed));
  ASSERT_GT(pid, 0);
  ASSERT_TRUE(wait_for_checkpoint(killed, pid)) << "the run ended before its first checkpoint";
  ASSERT_EQ(::kill(pid, SIGKILL), 0);
  int status = 0;
  ASSERT_EQ(::waitpid(pid, &status, 0), pid);
  ASSERT_TRUE(WIFSIGNALED(status) && WTERMSIG(status) == SIGKILL) << status;
  EXPECT_FALSE(fs::exists(killed / "model.safetensors"));
  const int64_t at = io::list_checkpoints(killed.string()).front().first;
  EXPECT_LT(at, 1500);
  r = mixp_fast("train --resume '" + killed.string() + "'");
  ASSERT_EQ(r.status, 0) << r.err;
  EXPECT_NE(r.out.find("resumed from"), std::string::npos) << r.out;
  EXPECT_EQ(tensors(straight / "model.safetensors"), tensors(killed / "model.safetensors"));
  EXPECT_EQ(json_number(slurp(straight / "summary.json"), "final_eval_loss"),
            json_number(slurp(killed / "summary.json"), "final_eval_loss"));
}

TEST_F(CliCheckpoint, SigtermWritesACheckpointAndExitsZero) {
  const fs::path out = dir_ / "run";
  const pid_t pid = spawn(train_args(out));
  ASSERT_GT(pid, 0);
  ASSERT_TRUE(wait_for_checkpoint(out, pid)) << "the run ended before its first checkpoint";
  ASSERT_EQ(::kill(pid, SIGTERM), 0);
  int status = 0;
  ASSERT_EQ(::waitpid(pid, &status, 0), pid);
  ASSERT_TRUE(WIFEXITED(status)) << status;
  EXPECT_EQ(WEXITSTATUS(status), 0) << slurp(dir_ / "bg.err");
  const std::string printed = slurp(dir_ / "bg.out");
  EXPECT_NE(printed.find("stopped by signal 15"), std::string::npos) << printed;
  EXPECT_NE(printed.find("--resume"), std::string::npos) << printed;
  const auto all = io::list_checkpoints(out.string());
  ASSERT_FALSE(all.empty());
  // The stop's checkpoint is the newest and loads; the run resumes from it to the end.
  EXPECT_NO_THROW(io::read_safetensors(all.front().second));
  EXPECT_FALSE(fs::exists(out / "model.safetensors"));
  const CliResult r = mixp("train --resume '" + out.string() + "'");
  ASSERT_EQ(r.status, 0) << r.err;
  EXPECT_EQ(json_number(slurp(out / "summary.json"), "steps"), 1500.0);
}

TEST_F(CliCheckpoint, ResumeSkipsATornCheckpointWithAMessage) {
  const fs::path straight = dir_ / "straight", torn = dir_ / "torn";
  ASSERT_EQ(mixp(train_args(straight)).status, 0);
  ASSERT_EQ(mixp(train_args(torn)).status, 0);
  // The run's last two checkpoints (1450, 1500); tear the newest, as a crash mid-write would
  // leave a temporary file, and redo the end of the run from the one before.
  const auto all = io::list_checkpoints(torn.string());
  ASSERT_EQ(all.size(), 2u);
  fs::resize_file(all[0].second, 1000);
  std::ofstream(torn / ".checkpoint-00001500.safetensors.tmp.1", std::ios::binary) << "partial";
  fs::remove(torn / "model.safetensors");
  const CliResult r = mixp("train --resume '" + torn.string() + "'");
  ASSERT_EQ(r.status, 0) << r.err;
  EXPECT_NE(r.err.find("skipping "), std::string::npos) << r.err;
  EXPECT_NE(r.out.find("checkpoint-00001450"), std::string::npos) << r.out;
  EXPECT_EQ(tensors(straight / "model.safetensors"), tensors(torn / "model.safetensors"));
}

TEST_F(CliCheckpoint, ResumeOfAFolderWithoutCheckpointsExitsWithTwo) {
  const CliResult r = mixp("train --resume '" + (dir_ / "nothing").string() + "'");
  EXPECT_EQ(r.status, 2);
  EXPECT_NE(r.err.find("no usable checkpoint"), std::string::npos) << r.err;
}

// ---- reliability from outside: corrupt files, non-finite steps, --resume with flags ----------

// A folder of small IDX files (8x8 images, 10 classes) the mlp learns in a few steps.
class CliReliability : public Cli {
 protected:
  using Bytes = std::vector<uint8_t>;
  static Bytes images(uint32_t n) {
    Bytes px;
    for (uint32_t i = 0; i < n; ++i)
      for (uint32_t p = 0; p < 64; ++p) px.push_back(uint8_t((p % 10 == i % 10 ? 200 : 0) + p % 7));
    return data::test::idx_bytes(0x803, {n, 8, 8}, px);
  }
  static Bytes labels(uint32_t n) {
    Bytes l;
    for (uint32_t i = 0; i < n; ++i) l.push_back(uint8_t(i % 10));
    return data::test::idx_bytes(0x801, {n}, l);
  }
  fs::path data_set(const std::string& name) {
    const fs::path d = dir_ / name;
    fs::create_directories(d);
    data::test::write_file(d / "train-images-idx3-ubyte", images(128));
    data::test::write_file(d / "train-labels-idx1-ubyte", labels(128));
    data::test::write_file(d / "t10k-images-idx3-ubyte", images(40));
    data::test::write_file(d / "t10k-labels-idx1-ubyte", labels(40));
    return d;
  }
  std::string mlp(const fs::path& data, const fs::path& out, const std::string& more = "") {
    return "train --model mlp --data '" + data.string() + "' --out '" + out.string() +
           "' --threads 1 " + more;
  }
  // tests/io/independent_safetensors_reader.py on `file`: names, dtypes, shapes, offsets.
  CliResult mixp_python(const fs::path& file) {
    const fs::path out = dir_ / "py.out", err = dir_ / "py.err";
    const std::string command = "/usr/bin/python3 '" MIXP_INDEPENDENT_READER "' --layout '" +
                                file.string() + "' > '" + out.string() + "' 2> '" + err.string() +
                                "'";
    const int raw = std::system(command.c_str());
    return {WIFEXITED(raw) ? WEXITSTATUS(raw) : -1, slurp(out), slurp(err)};
  }
};

TEST_F(CliReliability, CorruptIdxFilesExitWithTwoNamingTheFile) {
  struct Case {
    const char* file;
    Bytes bytes;
    const char* problem;
  };
  Bytes cut = images(128);
  cut.resize(cut.size() - 100);
  Bytes extra = labels(128);
  extra.push_back(7);
  const std::vector<Case> cases = {
      {"train-images-idx3-ubyte", cut, "truncated: expected 8208 bytes"},
      {"train-labels-idx1-ubyte", extra, "1 unexpected bytes after the data"},
      {"train-labels-idx1-ubyte", labels(127), "127 labels"},
      {"t10k-images-idx3-ubyte", data::test::idx_bytes(0x08030000, {}, {}), "wrong magic number"},
      {"t10k-labels-idx1-ubyte", data::test::idx_bytes(0x801, {0xFFFFFFFF}, {1, 2}), "truncated"},
      {"t10k-labels-idx1-ubyte", {}, "truncated: expected at least 4 bytes"},
  };
  int n = 0;
  for (const Case& c : cases) {
    SCOPED_TRACE(c.problem);
    const fs::path d = data_set("set" + std::to_string(n++));
    data::test::write_file(d / c.file, c.bytes);
    const CliResult r = mixp(mlp(d, dir_ / "out", "--steps 2"));
    EXPECT_EQ(r.status, 2);
    EXPECT_NE(r.err.find(c.file), std::string::npos) << r.err;
    EXPECT_NE(r.err.find(c.problem), std::string::npos) << r.err;
    EXPECT_EQ(r.err.find("internal error"), std::string::npos) << r.err;
  }
  // A .gz name over bytes that are not gzip.
  const fs::path d = data_set("gz");
  fs::remove(d / "t10k-images-idx3-ubyte");
  data::test::write_file(d / "t10k-images-idx3-ubyte.gz", images(40));
  const CliResult r = mixp(mlp(d, dir_ / "out", "--steps 2"));
  EXPECT_EQ(r.status, 2);
  EXPECT_NE(r.err.find("t10k-images-idx3-ubyte.gz: not gzip data"), std::string::npos) << r.err;
}

TEST_F(CliReliability, ResumeOfAFolderOfOnlyCorruptCheckpointsExitsWithTwo) {
  const fs::path data = data_set("idx"), run = dir_ / "run";
  ASSERT_EQ(mixp(mlp(data, run, "--steps 8 --checkpoint-every 4")).status, 0);
  const auto all = io::list_checkpoints(run.string());
  ASSERT_EQ(all.size(), 2u);  // 8 and 4
  // The newest cut short; the other with one NaN weight; a third whose header is not JSON.
  fs::resize_file(all[0].second, fs::file_size(all[0].second) - 3);
  io::SafetensorsFile f = io::read_safetensors(all[1].second);
  std::vector<double> w = f.tensors.at("model/param/fc1.bias").to_vector();
  w[9] = std::nan("");
  f.tensors["model/param/fc1.bias"] = from_values(w, {int64_t(w.size())});
  io::write_safetensors(
      all[1].second,
      std::vector<std::pair<std::string, Tensor>>(f.tensors.begin(), f.tensors.end()), f.metadata);
  const fs::path garbled = run / io::checkpoint_file_name(2);
  std::ofstream(garbled, std::ios::binary)
      << std::string("\x10\0\0\0\0\0\0\0{\"a\": [1, 2,}   ", 24);
  const CliResult r = mixp("train --resume '" + run.string() + "'");
  EXPECT_EQ(r.status, 2);
  EXPECT_NE(r.err.find("no usable checkpoint"), std::string::npos) << r.err;
  EXPECT_NE(r.err.find(all[0].second + ": tensor"), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("run past the end of the data"), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("tensor 'model/param/fc1.bias' is corrupt"), std::string::npos) << r.err;
  EXPECT_NE(r.err.find(garbled.string() + ": the header is not valid JSON"), std::string::npos)
      << r.err;
}

TEST_F(CliReliability, ANonFiniteLossStopsWithTwoOrIsSkipped) {
  // A learning rate of 1e30 throws the weights to 1e30 in one AdamW step; the next forward
  // pass overflows fp32 and the loss is a NaN.
  const fs::path data = data_set("idx"), run = dir_ / "run";
  CliResult r = mixp(mlp(data, run, "--steps 6 --lr 1e30 --checkpoint-every 4"));
  EXPECT_EQ(r.status, 2);
  EXPECT_NE(r.err.find("step 2: the loss is"), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("the gradient of 'fc1.weight' holds"), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("--on-nonfinite skip"), std::string::npos) << r.err;
  const auto all = io::list_checkpoints(run.string());
  ASSERT_EQ(all.size(), 1u);  // the last good state, that of step 1
  EXPECT_EQ(all[0].first, 1);
  EXPECT_FALSE(io::find_nonfinite(io::read_safetensors(all[0].second)));
  EXPECT_FALSE(fs::exists(run / "model.safetensors"));
  // Continued with skip: every later batch is dropped. Past 5% of the run's steps that is a
  // divergence; with that limit lifted, the evaluation of weights thrown to 1e30 is not finite,
  // which is one too. Either way no model is written.
  r = mixp("train --resume '" + run.string() + "' --on-nonfinite skip");
  EXPECT_EQ(r.status, 2);
  EXPECT_NE(r.out.find("resume: --on-nonfinite skip instead of the run's stop"), std::string::npos)
      << r.out;
  EXPECT_NE(r.err.find("the run diverged at step 2"), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("--max-skipped-fraction"), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("the gradient of 'fc1.weight' holds"), std::string::npos) << r.err;
  EXPECT_NE(r.err.find(all[0].second + ", is kept"), std::string::npos) << r.err;
  r = mixp("train --resume '" + run.string() + "' --on-nonfinite skip --max-skipped-fraction 1");
  EXPECT_EQ(r.status, 2);
  EXPECT_NE(r.err.find("the evaluation loss is"), std::string::npos) << r.err;
  EXPECT_FALSE(fs::exists(run / "model.safetensors"));
  // The same from the start: the same diagnosis.
  const CliResult fresh = mixp(
      mlp(data, dir_ / "skip", "--steps 6 --lr 1e30 --on-nonfinite skip --max-skipped-fraction 1"));
  EXPECT_EQ(fresh.status, 2);
  const std::string diagnosis = r.err.substr(0, r.err.find(" The last good"));
  EXPECT_EQ(fresh.err.rfind(diagnosis, 0), 0u) << fresh.err;
  EXPECT_EQ(mixp(mlp(data, dir_ / "bad", "--steps 2 --on-nonfinite ignore")).status, 2);
}

TEST_F(CliReliability, ResumeRefusesFlagsThatChangeTheRunAndAppliesTheOthers) {
  const fs::path data = data_set("idx"), straight = dir_ / "straight", run = dir_ / "run";
  ASSERT_EQ(mixp(mlp(data, straight, "--steps 20 --checkpoint-every 5")).status, 0);
  ASSERT_EQ(mixp(mlp(data, run, "--steps 20 --checkpoint-every 5")).status, 0);
  // Back to step 15, as if the run had been killed there.
  fs::remove(run / io::checkpoint_file_name(20));
  fs::remove(run / "model.safetensors");
  const std::string resume = "train --resume '" + run.string() + "' ";
  struct Refused {
    std::string flags, named;
  };
  for (const Refused& c :
       std::vector<Refused>{{"--classes 12", "--classes 12 differs from the run's 10"},
                            {"--precision bf16", "--precision bf16 differs"},
                            {"--lr 0.01", "--lr 0.01 differs from the run's 0.001"},
                            {"--seed 3", "--seed 3 differs from the run's 0"},
                            {"--batch 8", "--batch 8 differs from the run's 0"},
                            {"--model cnn", "--model cnn differs"},
                            {"--data /elsewhere", "--data /elsewhere differs"}}) {
    SCOPED_TRACE(c.flags);
    const CliResult r = mixp(resume + c.flags);
    EXPECT_EQ(r.status, 2);
    EXPECT_NE(r.err.find(c.named), std::string::npos) << r.err;
    EXPECT_EQ(io::list_checkpoints(run.string()).front().first, 15) << "nothing was trained";
  }
  // The run's own values may be repeated; pacing flags are applied and said.
  const CliResult r =
      mixp(resume + "--model mlp --steps 20 --lr 0.001 --checkpoint-every 2 --log-interval 5");
  ASSERT_EQ(r.status, 0) << r.err;
  EXPECT_NE(r.out.find("resume: --checkpoint-every 2 instead of the run's 5"), std::string::npos)
      << r.out;
  EXPECT_NE(r.out.find("resume: --log-interval 5 instead of the run's 10"), std::string::npos)
      << r.out;
  const auto all = io::list_checkpoints(run.string());
  ASSERT_EQ(all.size(), 2u);
  EXPECT_EQ(all[0].first, 20);
  EXPECT_EQ(all[1].first, 18);  // every 2 steps from 15 on
  EXPECT_EQ(tensors(straight / "model.safetensors"), tensors(run / "model.safetensors"));
}

TEST_F(CliReliability, ModelSafetensorsReadsWithAnIndependentReader) {
  if (!fs::exists("/usr/bin/python3")) GTEST_SKIP() << "/usr/bin/python3 is not installed";
  const fs::path data = data_set("idx");
  for (const char* precision : {"fp32", "bf16", "fp16"}) {
    SCOPED_TRACE(precision);
    const fs::path run = dir_ / precision;
    ASSERT_EQ(mixp(mlp(data, run, std::string("--steps 3 --precision ") + precision)).status, 0);
    const CliResult r = mixp_python(run / "model.safetensors");
    ASSERT_EQ(r.status, 0) << r.err;
    for (const auto& [name, t] : io::read_safetensors((run / "model.safetensors").string()).tensors)
      EXPECT_NE(r.out.find("\"" + name + "\": {\"dtype\": \"" +
                           io::safetensors_dtype_name(t.dtype()) + "\""),
                std::string::npos)
          << name;
  }
}

}  // namespace
}  // namespace mixp
