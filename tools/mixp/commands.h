// The subcommands of the mixp command line. Each returns the process exit status; errors are
// reported as mixp::Error and turned into a message and status 2 by main().
#pragma once

#include <cstdint>
#include <cstdio>
#include <functional>
#include <optional>
#include <string>
#include <vector>

namespace CLI {
class App;
}

namespace mixp::cli {

struct ConvertOptions {
  std::string from;
  std::string to;
  bool saturate = false;
  std::string rounding = "nearest_even";
  uint64_t seed = 0;  ///< for --rounding stochastic
};
/// Reads one hex bit pattern per line from `in`, writes one converted pattern per line to `out`.
int run_convert(const ConvertOptions& options, std::FILE* in, std::FILE* out);

struct ScalerTraceOptions {
  double init = 65536.0;  ///< the initial scale, rounded to fp32
  double growth = 2.0;
  double backoff = 0.5;
  int64_t interval = 2000;
};
/// Reads one found_inf flag (0 or 1) per line from `in`; writes, per line, the scale that step
/// used (8 hex digits of its fp32 bits) and whether the step was applied (1) or skipped (0).
int run_scaler_trace(const ScalerTraceOptions& options, std::FILE* in, std::FILE* out);

/// Prints the table of every format.
int run_formats(std::FILE* out);

/// Prints the autocast policy of every op: name, policy, output dtype rule.
int run_amp_policy(std::FILE* out);

/// The flags of `mixp train` and `mixp compare`.
struct TrainCommandOptions {
  std::string model;
  std::string data;  ///< empty: the model's default data set
  std::string precision = "fp32";
  std::string precisions;       ///< compare: a comma-separated list of presets
  std::string optimizer_state;  ///< "f32" or "bf16"; empty: each preset's
  /// "floor" or "up"; empty: mixp's default (--resume: the run's)
  std::string mx_scale_rounding;
  std::string fp4_without;  ///< --fp4-without: a list of FP4 ingredients
  std::optional<int64_t> epochs;
  std::optional<int64_t> steps;
  int64_t batch = 0;  ///< 0: the model's default
  std::optional<double> lr;
  std::string seed = "0";  ///< parsed by run_config(): a negative or too large seed is refused
  int threads = 0;         ///< 0: mixp's default
  std::string out;  ///< empty: runs/<model>-<precision> (train), runs/compare-<model> (compare)
  int64_t eval_interval = 0;
  int64_t log_interval = 10;
  int64_t grad_accum = 1;            ///< micro-batches per step
  std::string reduce_dtype = "f32";  ///< under mpirun: the gradients on the wire, f32 or bf16
  bool deterministic = false;        ///< under mpirun: bitwise one process with --grad-accum N
  double bucket_mb = 25.0;           ///< under mpirun: MiB per gradient bucket
  bool check_replicas = false;       ///< under mpirun: prove the ranks' weights equal each step
  int zero = 0;                      ///< under mpirun: 1 partitions the optimizer state (ZeRO-1)
  std::optional<int> layers, heads;
  std::optional<int64_t> width, context;
  int64_t checkpoint_every = 0;       ///< steps between checkpoints; 0: none
  std::string resume;                 ///< train: continue the run in this folder
  bool resume_compare = false;        ///< compare: finish the precisions of --out
  std::vector<std::string> from;      ///< compare: finished run folders to compare, untrained
  bool overwrite = false;             ///< replace another run's files in the folder
  std::string on_nonfinite = "stop";  ///< stop or skip (TrainOptions::on_nonfinite)
  std::string optimizer = "adamw";
  std::optional<double> momentum, weight_decay, eps;
  bool nesterov = false;
  std::vector<double> betas;  ///< two values, or none for the defaults
  std::string schedule;       ///< empty: the model's default
  std::optional<int64_t> warmup_steps;
  std::optional<double> min_lr;
  double clip_norm = 1.0;
  double min_loss_scale = 0x1p-14;
  int64_t max_skipped_in_a_row = 25;
  double max_skipped_fraction = 0.05;
  std::string max_memory;  ///< bytes, with K, M, G or T (powers of 1024); empty: what is free
  std::optional<int64_t> classes;      ///< image classifiers: labels 0 .. classes - 1
  std::optional<double> val_fraction;  ///< text: the fraction that validates
  std::string init_from;               ///< start from this trained model's weights
  double underflow_growth = 0.0;       ///< TrainOptions::scaler_underflow_fraction
  int64_t underflow_check_every = 1;   ///< TrainOptions::scaler_underflow_check_interval
  int64_t sample_every = 0;            ///< train: TrainOptions::sample_every
  int64_t sample_tokens = 200;         ///< train: TrainOptions::sample_tokens
  /// The flags given on the command line ("--steps", ...), filled by record_given_flags():
  /// --resume compares them with the run's own settings.
  std::vector<std::string> given;
};
/// Adds the flags shared by train and compare to `command` (compare: --precisions instead of
/// --precision).
void add_train_flags(CLI::App& command, TrainCommandOptions& options, bool compare);
/// --mx-scale-rounding floor|up into `value`; `default_text` says what leaving it out means.
void add_mx_scale_rounding_flag(CLI::App& command, std::string& value,
                                const std::string& default_text);
/// With --init-from: the model and the shape flags not given become the trained model's.
TrainCommandOptions with_trained_model_shape(TrainCommandOptions options);
/// --seed's text as a seed: an integer from 0 to 2^64 - 1, else mixp::Error.
uint64_t parse_seed(const std::string& text);
/// Fills options.given from the parsed `command`.
void record_given_flags(const CLI::App& command, TrainCommandOptions& options);
/// Throws mixp::Error when mpirun started this process as one of several: `mixp compare` runs
/// as one process.
void refuse_several_processes();
/// Runs `body` in a process that is one of several ranks started by mpirun: an error is
/// printed (by rank 0 as usual, by the others with their rank), and the process ends with
/// status 2 at once, without waiting on the other ranks, which mpirun then ends. A single
/// process returns body()'s status and lets errors through.
int as_one_of_the_ranks(int rank, int ranks, const std::function<int()>& body);
/// mixp train: progress and the final line to `out`, the run folder to options.out.
int run_train_command(const TrainCommandOptions& options, std::FILE* out);
/// mixp compare: each precision into out/<precision>/, then the table to `out`.
int run_compare_command(const TrainCommandOptions& options, std::FILE* out);

/// "a,b,c" as presets; throws mixp::Error naming `flag` for an empty name or list.
std::vector<std::string> parse_precisions(const std::string& text, const char* flag);

/// mixp eval: a trained model over a whole evaluation split, under one or several presets.
struct EvalCommandOptions {
  std::string path;        ///< a run folder, model.safetensors or checkpoint
  std::string data;        ///< other data; empty: the run's own
  std::string precision;   ///< one preset; empty: the run's own
  std::string precisions;  ///< several, comma-separated
  int64_t batch = 0;       ///< 0: the run's
  int threads = 0;         ///< 0: the run's, else all
  bool json = false;       ///< JSON instead of the table
  /// "floor" or "up"; empty: the run's own
  std::string mx_scale_rounding;
};
void add_eval_flags(CLI::App& command, EvalCommandOptions& options);
int run_eval_command(const EvalCommandOptions& options, std::FILE* out);

/// mixp inspect: brief training, then the per-layer table to `out` and the inspect folder.
struct InspectCommandOptions {
  TrainCommandOptions train;  ///< model, data, precision, steps, batch, seed, shape, out
  int64_t every = 10;         ///< training steps between collections
  std::string formats;        ///< comma-separated formats to ask besides the standard four
  std::string from;           ///< a trained run, model.safetensors or checkpoint to inspect
  std::string block_formats;  ///< comma-separated block-scaled presets to measure Linear layers in
};
void add_inspect_flags(CLI::App& command, InspectCommandOptions& options);
int run_inspect_command(const InspectCommandOptions& options, std::FILE* out);

/// mixp report: one self-contained HTML file of run, compare and inspect folders.
struct ReportCommandOptions {
  std::vector<std::string> folders;
  std::string out;  ///< empty: report.html in the first folder
};
void add_report_flags(CLI::App& command, ReportCommandOptions& options);
int run_report_command(const ReportCommandOptions& options, std::FILE* out);

/// mixp sample: text from a trained gpt or lstm, the prompt first, to `out`.
struct SampleCommandOptions {
  std::string from;    ///< a run folder, a model.safetensors or a checkpoint
  std::string prompt;  ///< empty: "\n" when the vocabulary has it, else its first character
  int64_t tokens = 200;
  double temperature = 1.0;
  int64_t top_k = 0;
  std::string seed = "0";
  std::string precision;  ///< empty: the run's own preset
  bool no_cache = false;
  int threads = 0;
};
void add_sample_flags(CLI::App& command, SampleCommandOptions& options);
int run_sample_command(const SampleCommandOptions& options, std::FILE* out);

}  // namespace mixp::cli
