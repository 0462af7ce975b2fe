// The mixp command line. Every error becomes a message on stderr and exit status 2.
#include <CLI/CLI.hpp>
#include <cstdio>
#include <cstdlib>
#include <exception>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "bench/bench.h"
#include "commands.h"
#include "mixp/cpu.h"
#include "mixp/dtype.h"
#include "mixp/error.h"
#include "mixp/train/trainer.h"

namespace {

// "mixp convert" once the command line is parsed: the prefix of error messages.
std::string g_command = "mixp";

// A subcommand, and what it runs when the command line chose it. The options it fills live in
// the closure, so they outlive the parsing.
struct Command {
  CLI::App* app;
  std::function<int()> run;
};
using Commands = std::vector<Command>;

void add_number_format_commands(CLI::App& app, Commands& commands) {
  auto convert = std::make_shared<mixp::cli::ConvertOptions>();
  CLI::App* convert_cmd =
      app.add_subcommand("convert", "convert hex bit patterns, one per line, from stdin to stdout");
  convert_cmd
      ->add_option("--from", convert->from,
                   "input format: f32, f16, bf16, e4m3, e5m2, "
                   "or any format of 'mixp formats', or eXmY")
      ->required();
  convert_cmd->add_option("--to", convert->to, "output format, as --from")->required();
  convert_cmd->add_flag("--saturate", convert->saturate,
                        "overflow and infinities go to +-max instead of inf (or NaN for e4m3)");
  convert_cmd->add_option("--rounding", convert->rounding,
                          "nearest_even (default), toward_zero, up, down, stochastic, odd");
  convert_cmd->add_option("--seed", convert->seed, "seed of --rounding stochastic (default 0)");
  commands.push_back(
      {convert_cmd, [convert] { return mixp::cli::run_convert(*convert, stdin, stdout); }});

  auto trace = std::make_shared<mixp::cli::ScalerTraceOptions>();
  CLI::App* trace_cmd = app.add_subcommand(
      "scaler-trace",
      "the loss scale of GradScaler over steps: one found_inf flag (0/1) per line from stdin, "
      "'SCALE_BEFORE_HEX APPLIED' per line to stdout");
  trace_cmd->add_option("--init", trace->init, "initial scale (default 65536)");
  trace_cmd->add_option("--growth", trace->growth, "growth factor, > 1 (default 2)");
  trace_cmd->add_option("--backoff", trace->backoff, "backoff factor, in (0, 1) (default 0.5)");
  trace_cmd->add_option("--interval", trace->interval,
                        "clean steps in a row before the scale grows (default 2000)");
  commands.push_back(
      {trace_cmd, [trace] { return mixp::cli::run_scaler_trace(*trace, stdin, stdout); }});

  CLI::App* formats_cmd = app.add_subcommand("formats", "print the table of number formats");
  commands.push_back({formats_cmd, [] { return mixp::cli::run_formats(stdout); }});

  CLI::App* amp_cmd = app.add_subcommand("amp", "automatic mixed precision");
  amp_cmd->require_subcommand(1);
  CLI::App* amp_policy_cmd =
      amp_cmd->add_subcommand("policy", "print the autocast cast policy of every op");
  commands.push_back({amp_policy_cmd, [] { return mixp::cli::run_amp_policy(stdout); }});
}

void add_model_commands(CLI::App& app, Commands& commands) {
  auto train = std::make_shared<mixp::cli::TrainCommandOptions>();
  CLI::App* train_cmd =
      app.add_subcommand("train", "train a model under one precision preset; writes a run folder");
  mixp::cli::add_train_flags(*train_cmd, *train, /*compare=*/false);
  commands.push_back({train_cmd, [train, train_cmd] {
                        mixp::cli::record_given_flags(*train_cmd, *train);
                        return mixp::cli::run_train_command(*train, stdout);
                      }});

  auto compare = std::make_shared<mixp::cli::TrainCommandOptions>();
  CLI::App* compare_cmd = app.add_subcommand(
      "compare", "train the same model and seed under several presets; a table and a plot");
  mixp::cli::add_train_flags(*compare_cmd, *compare, /*compare=*/true);
  commands.push_back({compare_cmd, [compare, compare_cmd] {
                        mixp::cli::record_given_flags(*compare_cmd, *compare);
                        return mixp::cli::run_compare_command(*compare, stdout);
                      }});

  auto eval = std::make_shared<mixp::cli::EvalCommandOptions>();
  CLI::App* eval_cmd = app.add_subcommand(
      "eval",
      "evaluate a trained model over its whole validation or test split, under one or several "
      "presets");
  mixp::cli::add_eval_flags(*eval_cmd, *eval);
  commands.push_back({eval_cmd, [eval] { return mixp::cli::run_eval_command(*eval, stdout); }});

  auto inspect = std::make_shared<mixp::cli::InspectCommandOptions>();
  CLI::App* inspect_cmd = app.add_subcommand(
      "inspect",
      "train briefly, then per layer: which activation gradients fp16 flushes, unscaled and at "
      "the loss scale, and the safe loss scales; SVG histograms and JSON");
  mixp::cli::add_inspect_flags(*inspect_cmd, *inspect);
  commands.push_back({inspect_cmd, [inspect, inspect_cmd] {
                        mixp::cli::record_given_flags(*inspect_cmd, inspect->train);
                        return mixp::cli::run_inspect_command(*inspect, stdout);
                      }});

  auto report = std::make_shared<mixp::cli::ReportCommandOptions>();
  CLI::App* report_cmd = app.add_subcommand(
      "report", "one self-contained HTML file of run, compare and inspect folders");
  mixp::cli::add_report_flags(*report_cmd, *report);
  commands.push_back(
      {report_cmd, [report] { return mixp::cli::run_report_command(*report, stdout); }});

  auto sample = std::make_shared<mixp::cli::SampleCommandOptions>();
  CLI::App* sample_cmd = app.add_subcommand(
      "sample", "text from a trained gpt or lstm: the prompt and what the model writes after it");
  mixp::cli::add_sample_flags(*sample_cmd, *sample);
  commands.push_back(
      {sample_cmd, [sample] { return mixp::cli::run_sample_command(*sample, stdout); }});
}

// bench convert, matmul, step and peak: kernels and the bare step.
void add_kernel_bench_commands(CLI::App& bench, Commands& commands) {
  auto convert = std::make_shared<mixp::bench::ConvertBenchOptions>();
  CLI::App* convert_cmd = bench.add_subcommand(
      "convert", "bulk fp32 <-> fp16/bf16/fp8 conversion against memcpy, in GB/s");
  convert_cmd->add_option("--mib", convert->mib, "buffer size in MiB (default 64)");
  convert_cmd->add_option("--reps", convert->reps, "timed repetitions (default 10)");
  commands.push_back(
      {convert_cmd, [convert] { return mixp::bench::run_convert(*convert, stdout); }});

  auto matmul = std::make_shared<mixp::bench::MatmulBenchOptions>();
  auto matmul_dtype = std::make_shared<std::string>("f32");
  CLI::App* matmul_cmd =
      bench.add_subcommand("matmul", "ops::matmul against a bare oneDNN matmul, in GFLOP/s");
  matmul_cmd->add_option("--dtype", *matmul_dtype, "f32 or bf16 (default f32)");
  matmul_cmd->add_option("--m", matmul->m, "rows of A (default 4096)");
  matmul_cmd->add_option("--k", matmul->k, "inner size (default 768)");
  matmul_cmd->add_option("--n", matmul->n, "columns of B (default 3072)");
  matmul_cmd->add_option("--reps", matmul->reps, "timed runs (default 10)");
  commands.push_back({matmul_cmd, [matmul, matmul_dtype] {
                        matmul->dtype = mixp::parse_dtype(*matmul_dtype);
                        return mixp::bench::run_matmul(*matmul, stdout);
                      }});

  auto step = std::make_shared<mixp::bench::StepBenchOptions>();
  auto step_dtype = std::make_shared<std::string>("f32");
  CLI::App* step_cmd = bench.add_subcommand(
      "step", "forward and backward of a training step: ms per step and peak memory by tag");
  step_cmd->add_option("--model", step->model, "gpt (default)");
  step_cmd->add_option("--dtype", *step_dtype, "f32 or bf16 (default f32)");
  step_cmd->add_option("--layers", step->layers, "default 6");
  step_cmd->add_option("--heads", step->heads, "default 6");
  step_cmd->add_option("--width", step->width, "default 384");
  step_cmd->add_option("--context", step->context, "default 256");
  step_cmd->add_option("--batch", step->batch, "default 16");
  step_cmd->add_option("--steps", step->steps, "timed steps (default 3)");
  commands.push_back({step_cmd, [step, step_dtype] {
                        step->dtype = mixp::parse_dtype(*step_dtype);
                        return mixp::bench::run_step(*step, stdout);
                      }});

  auto peak = std::make_shared<mixp::bench::PeakBenchOptions>();
  CLI::App* peak_cmd = bench.add_subcommand(
      "peak", "the machine's peak GFLOP/s: fp32 FMA and bf16 vdpbf16ps, one core and all");
  peak_cmd->add_option("--reps", peak->reps, "timed runs, the best kept (default 5)");
  commands.push_back({peak_cmd, [peak] { return mixp::bench::run_peak(*peak, stdout); }});
}

// bench train and sample: the built-in models.
void add_model_bench_commands(CLI::App& bench, Commands& commands) {
  auto train = std::make_shared<mixp::bench::TrainBenchOptions>();
  CLI::App* train_cmd = bench.add_subcommand(
      "train", "a training step of a built-in model: one JSON line of speed, FLOP/s and memory");
  train_cmd->add_option("--model", train->model, "mlp, cnn or gpt (default gpt)");
  train_cmd->add_option("--precision", train->precision, "a preset (default fp32)");
  train_cmd->add_option("--steps", train->steps, "timed steps (default 10)");
  train_cmd->add_option("--warmup", train->warmup, "untimed steps first (default 3)");
  train_cmd->add_option("--batch", train->batch, "default: as mixp train (64, 16)");
  train_cmd->add_option("--peak-gflops", train->peak_gflops,
                        "the peak to compare with (default: measured now)");
  commands.push_back({train_cmd, [train] { return mixp::bench::run_train_bench(*train, stdout); }});

  auto sample = std::make_shared<mixp::bench::SampleBenchOptions>();
  CLI::App* sample_cmd = bench.add_subcommand(
      "sample", "gpt text generation with and without the key/value cache, in tokens/s");
  sample_cmd->add_option("--layers", sample->layers, "default 6");
  sample_cmd->add_option("--heads", sample->heads, "default 6");
  sample_cmd->add_option("--width", sample->width, "default 384");
  sample_cmd->add_option("--context", sample->context, "default 256");
  sample_cmd->add_option("--precision", sample->precision, "a preset (default fp32)");
  sample_cmd->add_option(
      "--tokens", sample->tokens,
      "tokens generated per round (default 255: the prompt and these fill the context)");
  sample_cmd->add_option("--rounds", sample->rounds, "timed rounds (default 3)");
  commands.push_back(
      {sample_cmd, [sample] { return mixp::bench::run_sample_bench(*sample, stdout); }});
}

// bench allreduce and dp: communication and data-parallel training under mpirun.
void add_parallel_bench_commands(CLI::App& bench, Commands& commands) {
  auto allreduce = std::make_shared<mixp::bench::AllReduceBenchOptions>();
  auto allreduce_dtype = std::make_shared<std::string>("f32");
  CLI::App* allreduce_cmd = bench.add_subcommand(
      "allreduce",
      "under mpirun: the time of a Communicator all-reduce of one buffer between the ranks; "
      "rank 0 prints one JSON line");
  allreduce_cmd->add_option("--elements", allreduce->elements,
                            "values in the buffer (default 6553600: 25 MiB of f32)");
  allreduce_cmd->add_option("--dtype", *allreduce_dtype, "f32 or bf16 (default f32)");
  allreduce_cmd->add_option("--reps", allreduce->reps, "timed all-reduces (default 20)");
  allreduce_cmd->add_option("--warmup", allreduce->warmup, "untimed all-reduces first (default 3)");
  commands.push_back({allreduce_cmd, [allreduce, allreduce_dtype] {
                        allreduce->dtype = mixp::parse_dtype(*allreduce_dtype);
                        return mixp::bench::run_allreduce_bench(*allreduce, stdout);
                      }});

  auto dp = std::make_shared<mixp::bench::DpBenchOptions>();
  CLI::App* dp_cmd = bench.add_subcommand(
      "dp",
      "data-parallel training: mixp train under mpirun at 1 and 2 ranks, one thread each, the "
      "same batch per rank; weak scaling, exposed communication, bytes per step, peak memory");
  dp_cmd->add_option("--data", dp->data,
                     "the text (default $MIXP_KJV, else data/kjv.txt from "
                     "scripts/make-kjv.sh)");
  dp_cmd->add_option("--rounds", dp->rounds,
                     "rounds of every run; medians are reported (default 3)");
  dp_cmd->add_option("--steps", dp->steps, "steps of each run (default 80)");
  dp_cmd->add_option("--batch-per-rank", dp->batch_per_rank,
                     "sequences per rank and step (default 8)");
  dp_cmd->add_option("--layers", dp->layers, "gpt blocks (default 4)");
  dp_cmd->add_option("--heads", dp->heads, "default 4");
  dp_cmd->add_option("--width", dp->width, "default 256");
  dp_cmd->add_option("--context", dp->context, "default 64");
  dp_cmd
      ->add_option("--bucket-mb", dp->bucket_mb,
                   "comma-separated gradient bucket sizes of the f32 runs; bf16 runs "
                   "with the first (default 25,4,1)")
      ->delimiter(',');
  dp_cmd->add_option("--allreduce-reps", dp->allreduce_reps,
                     "timed standalone all-reduces per round (default 20)");
  dp_cmd->add_option("--val-fraction", dp->val_fraction,
                     "the validation split, evaluated once after training, untimed "
                     "(default 0.001)");
  dp_cmd->add_option("--out", dp->out, "the folder of the runs and logs (default runs/bench-dp)");
  dp_cmd->add_option("--mpirun", dp->mpirun, "Open MPI's mpirun (default: on PATH)");
  dp_cmd->add_option("--mixp", dp->mixp, "the mixp that trains (default: this one)");
  commands.push_back({dp_cmd, [dp] {
                        // The environment is read here, at the program's edge, as mixp train
                        // reads it.
                        if (dp->data.empty())
                          if (const char* env = std::getenv("MIXP_KJV"); env && *env)
                            dp->data = env;
                        return mixp::bench::run_dp_bench(*dp, stdout);
                      }});
}

int main_checked(int argc, char** argv) {
  CLI::App app{"mixp: mixed- and low-precision training"};
  app.require_subcommand(1);
  app.set_version_flag("--version", std::string("mixp ") + mixp::train::version(),
                       "print mixp's version and exit");
  std::string isa_name;
  app.add_option("--isa", isa_name,
                 "highest instruction set for the kernels: scalar, avx2, avx512, avx512_bf16 "
                 "(default: the best this CPU has; also MIXP_MAX_ISA)");
  Commands commands;
  add_number_format_commands(app, commands);
  add_model_commands(app, commands);
  CLI::App* bench_cmd =
      app.add_subcommand("bench", "measure the speed and memory of kernels, steps and runs");
  bench_cmd->require_subcommand(1);
  add_kernel_bench_commands(*bench_cmd, commands);
  add_model_bench_commands(*bench_cmd, commands);
  add_parallel_bench_commands(*bench_cmd, commands);

  try {
    app.parse(argc, argv);
  } catch (const CLI::CallForVersion& e) {
    return app.exit(e);
  } catch (const CLI::CallForHelp& e) {
    return app.exit(e);
  } catch (const CLI::CallForAllHelp& e) {
    return app.exit(e);
  } catch (const CLI::ParseError& e) {
    app.exit(e);
    return 2;
  }

  for (const CLI::App* sub : app.get_subcommands()) g_command += " " + sub->get_name();
  if (isa_name.empty()) {
    if (const char* env = std::getenv("MIXP_MAX_ISA")) isa_name = env;
  }
  std::optional<mixp::IsaLimit> isa_limit;
  if (!isa_name.empty()) isa_limit.emplace(mixp::parse_isa(isa_name));
  for (const Command& command : commands)
    if (*command.app) return command.run();
  return 2;
}

}  // namespace

int main(int argc, char** argv) {
  try {
    return main_checked(argc, argv);
  } catch (const mixp::Error& e) {
    std::fprintf(stderr, "%s: %s\n", g_command.c_str(),
                 e.is_internal() ? e.what() : e.message().c_str());
  } catch (const std::exception& e) {
    std::fprintf(stderr, "%s: %s\n", g_command.c_str(), e.what());
  }
  return 2;
}
