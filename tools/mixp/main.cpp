// The mixp command line. Every error becomes a message on stderr and exit status 2.
#include <CLI/CLI.hpp>
#include <cstdio>
#include <cstdlib>
#include <exception>
#include <optional>
#include <string>

#include "bench/bench.h"
#include "commands.h"
#include "mixp/cpu.h"
#include "mixp/dtype.h"
#include "mixp/error.h"
#include "mixp/train/trainer.h"

namespace {

// "mixp convert" once the command line is parsed: the prefix of error messages.
std::string g_command = "mixp";

int main_checked(int argc, char** argv) {
  CLI::App app{"mixp: mixed- and low-precision training"};
  app.require_subcommand(1);
  app.set_version_flag("--version", std::string("mixp ") + mixp::train::version(),
                       "print mixp's version and exit");
  std::string isa_name;
  app.add_option("--isa", isa_name,
                 "highest instruction set for the kernels: scalar, avx2, avx512, avx512_bf16 "
                 "(default: the best this CPU has; also MIXP_MAX_ISA)");

  mixp::cli::ConvertOptions convert;
  CLI::App* convert_cmd =
      app.add_subcommand("convert", "convert hex bit patterns, one per line, from stdin to stdout");
  convert_cmd
      ->add_option("--from", convert.from,
                   "input format: f32, f16, bf16, e4m3, e5m2, "
                   "or any format of 'mixp formats', or eXmY")
      ->required();
  convert_cmd->add_option("--to", convert.to, "output format, as --from")->required();
  convert_cmd->add_flag("--saturate", convert.saturate,
                        "overflow and infinities go to +-max instead of inf (or NaN for e4m3)");
  convert_cmd->add_option("--rounding", convert.rounding,
                          "nearest_even (default), toward_zero, up, down, stochastic, odd");
  convert_cmd->add_option("--seed", convert.seed, "seed of --rounding stochastic (default 0)");

  mixp::cli::ScalerTraceOptions trace;
  CLI::App* trace_cmd = app.add_subcommand(
      "scaler-trace",
      "the loss scale of GradScaler over steps: one found_inf flag (0/1) per line from stdin, "
      "'SCALE_BEFORE_HEX APPLIED' per line to stdout");
  trace_cmd->add_option("--init", trace.init, "initial scale (default 65536)");
  trace_cmd->add_option("--growth", trace.growth, "growth factor, > 1 (default 2)");
  trace_cmd->add_option("--backoff", trace.backoff, "backoff factor, in (0, 1) (default 0.5)");
  trace_cmd->add_option("--interval", trace.interval,
                        "clean steps in a row before the scale grows (default 2000)");

  CLI::App* formats_cmd = app.add_subcommand("formats", "print the table of number formats");

  CLI::App* amp_cmd = app.add_subcommand("amp", "automatic mixed precision");
  amp_cmd->require_subcommand(1);
  CLI::App* amp_policy_cmd =
      amp_cmd->add_subcommand("policy", "print the autocast cast policy of every op");

  mixp::cli::TrainCommandOptions train;
  CLI::App* train_cmd =
      app.add_subcommand("train", "train a model under one precision preset; writes a run folder");
  mixp::cli::add_train_flags(*train_cmd, train, /*compare=*/false);

  mixp::cli::TrainCommandOptions compare;
  CLI::App* compare_cmd = app.add_subcommand(
      "compare", "train the same model and seed under several presets; a table and a plot");
  mixp::cli::add_train_flags(*compare_cmd, compare, /*compare=*/true);

  mixp::cli::EvalCommandOptions eval;
  CLI::App* eval_cmd = app.add_subcommand(
      "eval",
      "evaluate a trained model over its whole validation or test split, under one or several "
      "presets");
  mixp::cli::add_eval_flags(*eval_cmd, eval);

  mixp::cli::InspectCommandOptions inspect;
  CLI::App* inspect_cmd = app.add_subcommand(
      "inspect",
      "train briefly, then per layer: which activation gradients fp16 flushes, unscaled and at "
      "the loss scale, and the safe loss scales; SVG histograms and JSON");
  mixp::cli::add_inspect_flags(*inspect_cmd, inspect);

  mixp::cli::ReportCommandOptions report;
  CLI::App* report_cmd = app.add_subcommand(
      "report", "one self-contained HTML file of run, compare and inspect folders");
  mixp::cli::add_report_flags(*report_cmd, report);

  mixp::cli::SampleCommandOptions sample;
  CLI::App* sample_cmd = app.add_subcommand(
      "sample", "text from a trained gpt or lstm: the prompt and what the model writes after it");
  mixp::cli::add_sample_flags(*sample_cmd, sample);

  CLI::App* bench_cmd =
      app.add_subcommand("bench", "measure the speed and memory of kernels, steps and runs");
  bench_cmd->require_subcommand(1);
  mixp::bench::ConvertBenchOptions bench_convert;
  CLI::App* bench_convert_cmd = bench_cmd->add_subcommand(
      "convert", "bulk fp32 <-> fp16/bf16/fp8 conversion against memcpy, in GB/s");
  bench_convert_cmd->add_option("--mib", bench_convert.mib, "buffer size in MiB (default 64)");
  bench_convert_cmd->add_option("--reps", bench_convert.reps, "timed repetitions (default 10)");

  mixp::bench::MatmulBenchOptions bench_matmul;
  std::string bench_matmul_dtype = "f32";
  CLI::App* bench_matmul_cmd =
      bench_cmd->add_subcommand("matmul", "ops::matmul against a bare oneDNN matmul, in GFLOP/s");
  bench_matmul_cmd->add_option("--dtype", bench_matmul_dtype, "f32 or bf16 (default f32)");
  bench_matmul_cmd->add_option("--m", bench_matmul.m, "rows of A (default 4096)");
  bench_matmul_cmd->add_option("--k", bench_matmul.k, "inner size (default 768)");
  bench_matmul_cmd->add_option("--n", bench_matmul.n, "columns of B (default 3072)");
  bench_matmul_cmd->add_option("--reps", bench_matmul.reps, "timed runs (default 10)");

  mixp::bench::StepBenchOptions bench_step;
  std::string bench_step_dtype = "f32";
  CLI::App* bench_step_cmd = bench_cmd->add_subcommand(
      "step", "forward and backward of a training step: ms per step and peak memory by tag");
  bench_step_cmd->add_option("--model", bench_step.model, "gpt (default)");
  bench_step_cmd->add_option("--dtype", bench_step_dtype, "f32 or bf16 (default f32)");
  bench_step_cmd->add_option("--layers", bench_step.layers, "default 6");
  bench_step_cmd->add_option("--heads", bench_step.heads, "default 6");
  bench_step_cmd->add_option("--width", bench_step.width, "default 384");
  bench_step_cmd->add_option("--context", bench_step.context, "default 256");
  bench_step_cmd->add_option("--batch", bench_step.batch, "default 16");
  bench_step_cmd->add_option("--steps", bench_step.steps, "timed steps (default 3)");

  mixp::bench::PeakBenchOptions bench_peak;
  CLI::App* bench_peak_cmd = bench_cmd->add_subcommand(
      "peak", "the machine's peak GFLOP/s: fp32 FMA and bf16 vdpbf16ps, one core and all");
  bench_peak_cmd->add_option("--reps", bench_peak.reps, "timed runs, the best kept (default 5)");

  mixp::bench::TrainBenchOptions bench_train;
  CLI::App* bench_train_cmd = bench_cmd->add_subcommand(
      "train", "a training step of a built-in model: one JSON line of speed, FLOP/s and memory");
  bench_train_cmd->add_option("--model", bench_train.model, "mlp, cnn or gpt (default gpt)");
  bench_train_cmd->add_option("--precision", bench_train.precision, "a preset (default fp32)");
  bench_train_cmd->add_option("--steps", bench_train.steps, "timed steps (default 10)");
  bench_train_cmd->add_option("--warmup", bench_train.warmup, "untimed steps first (default 3)");
  bench_train_cmd->add_option("--batch", bench_train.batch, "default: as mixp train (64, 16)");
  bench_train_cmd->add_option("--peak-gflops", bench_train.peak_gflops,
                              "the peak to compare with (default: measured now)");

  mixp::bench::SampleBenchOptions bench_sample;
  CLI::App* bench_sample_cmd = bench_cmd->add_subcommand(
      "sample", "gpt text generation with and without the key/value cache, in tokens/s");
  bench_sample_cmd->add_option("--layers", bench_sample.layers, "default 6");
  bench_sample_cmd->add_option("--heads", bench_sample.heads, "default 6");
  bench_sample_cmd->add_option("--width", bench_sample.width, "default 384");
  bench_sample_cmd->add_option("--context", bench_sample.context, "default 256");
  bench_sample_cmd->add_option("--precision", bench_sample.precision, "a preset (default fp32)");
  bench_sample_cmd->add_option(
      "--tokens", bench_sample.tokens,
      "tokens generated per round (default 255: the prompt and these fill the context)");
  bench_sample_cmd->add_option("--rounds", bench_sample.rounds, "timed rounds (default 3)");

  mixp::bench::AllReduceBenchOptions bench_allreduce;
  std::string bench_allreduce_dtype = "f32";
  CLI::App* bench_allreduce_cmd = bench_cmd->add_subcommand(
      "allreduce",
      "under mpirun: the time of a Communicator all-reduce of one buffer between the ranks; "
      "rank 0 prints one JSON line");
  bench_allreduce_cmd->add_option("--elements", bench_allreduce.elements,
                                  "values in the buffer (default 6553600: 25 MiB of f32)");
  bench_allreduce_cmd->add_option("--dtype", bench_allreduce_dtype, "f32 or bf16 (default f32)");
  bench_allreduce_cmd->add_option("--reps", bench_allreduce.reps, "timed all-reduces (default 20)");
  bench_allreduce_cmd->add_option("--warmup", bench_allreduce.warmup,
                                  "untimed all-reduces first (default 3)");

  mixp::bench::DpBenchOptions bench_dp;
  CLI::App* bench_dp_cmd = bench_cmd->add_subcommand(
      "dp",
      "data-parallel training: mixp train under mpirun at 1 and 2 ranks, one thread each, the "
      "same batch per rank; weak scaling, exposed communication, bytes per step, peak memory");
  bench_dp_cmd->add_option("--data", bench_dp.data,
                           "the text (default $MIXP_KJV, else data/kjv.txt from "
                           "scripts/make-kjv.sh)");
  bench_dp_cmd->add_option("--rounds", bench_dp.rounds,
                           "rounds of every run; medians are reported (default 3)");
  bench_dp_cmd->add_option("--steps", bench_dp.steps, "steps of each run (default 80)");
  bench_dp_cmd->add_option("--batch-per-rank", bench_dp.batch_per_rank,
                           "sequences per rank and step (default 8)");
  bench_dp_cmd->add_option("--layers", bench_dp.layers, "gpt blocks (default 4)");
  bench_dp_cmd->add_option("--heads", bench_dp.heads, "default 4");
  bench_dp_cmd->add_option("--width", bench_dp.width, "default 256");
  bench_dp_cmd->add_option("--context", bench_dp.context, "default 64");
  bench_dp_cmd
      ->add_option("--bucket-mb", bench_dp.bucket_mb,
                   "comma-separated gradient bucket sizes of the f32 runs; bf16 runs "
                   "with the first (default 25,4,1)")
      ->delimiter(',');
  bench_dp_cmd->add_option("--allreduce-reps", bench_dp.allreduce_reps,
                           "timed standalone all-reduces per round (default 20)");
  bench_dp_cmd->add_option("--val-fraction", bench_dp.val_fraction,
                           "the validation split, evaluated once after training, untimed "
                           "(default 0.001)");
  bench_dp_cmd->add_option("--out", bench_dp.out,
                           "the folder of the runs and logs (default runs/bench-dp)");
  bench_dp_cmd->add_option("--mpirun", bench_dp.mpirun, "Open MPI's mpirun (default: on PATH)");
  bench_dp_cmd->add_option("--mixp", bench_dp.mixp, "the mixp that trains (default: this one)");

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

  if (*convert_cmd) return mixp::cli::run_convert(convert, stdin, stdout);
  if (*trace_cmd) return mixp::cli::run_scaler_trace(trace, stdin, stdout);
  if (*formats_cmd) return mixp::cli::run_formats(stdout);
  if (*train_cmd) {
    mixp::cli::record_given_flags(*train_cmd, train);
    return mixp::cli::run_train_command(train, stdout);
  }
  if (*compare_cmd) {
    mixp::cli::record_given_flags(*compare_cmd, compare);
    return mixp::cli::run_compare_command(compare, stdout);
  }
  if (*eval_cmd) return mixp::cli::run_eval_command(eval, stdout);
  if (*report_cmd) return mixp::cli::run_report_command(report, stdout);
  if (*inspect_cmd) {
    mixp::cli::record_given_flags(*inspect_cmd, inspect.train);
    return mixp::cli::run_inspect_command(inspect, stdout);
  }
  if (*sample_cmd) return mixp::cli::run_sample_command(sample, stdout);
  if (*amp_policy_cmd) return mixp::cli::run_amp_policy(stdout);
  if (*bench_convert_cmd) return mixp::bench::run_convert(bench_convert, stdout);
  if (*bench_step_cmd) {
    bench_step.dtype = mixp::parse_dtype(bench_step_dtype);
    return mixp::bench::run_step(bench_step, stdout);
  }
  if (*bench_peak_cmd) return mixp::bench::run_peak(bench_peak, stdout);
  if (*bench_sample_cmd) return mixp::bench::run_sample_bench(bench_sample, stdout);
  if (*bench_train_cmd) return mixp::bench::run_train_bench(bench_train, stdout);
  if (*bench_allreduce_cmd) {
    bench_allreduce.dtype = mixp::parse_dtype(bench_allreduce_dtype);
    return mixp::bench::run_allreduce_bench(bench_allreduce, stdout);
  }
  if (*bench_dp_cmd) {
    // The environment is read here, at the program's edge, as mixp train reads it.
    if (bench_dp.data.empty())
      if (const char* env = std::getenv("MIXP_KJV"); env && *env) bench_dp.data = env;
    return mixp::bench::run_dp_bench(bench_dp, stdout);
  }
  if (*bench_matmul_cmd) {
    bench_matmul.dtype = mixp::parse_dtype(bench_matmul_dtype);
    return mixp::bench::run_matmul(bench_matmul, stdout);
  }
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
