// mixp train: one model under one precision preset, into a run folder.
#include <unistd.h>
#include <CLI/CLI.hpp>
#include <algorithm>
#include <charconv>
#include <cmath>
#include <csignal>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <limits>
#include <optional>
#include <sstream>

#include "commands.h"
#include "mixp/dist/communicator.h"
#include "mixp/error.h"
#include "mixp/train/progress.h"
#include "mixp/train/run.h"
#include "mixp/train/trained_model.h"
#include "signals.h"

namespace mixp::cli {

void add_mx_scale_rounding_flag(CLI::App& command, std::string& value,
                                const std::string& default_text) {
  command
      .add_option("--mx-scale-rounding", value,
                  "how mxfp8 rounds its E8M0 block scales: floor (the OCP rule: a block's "
                  "largest values may saturate) or up (NVIDIA's MXFP8 recipe: none saturates); "
                  "default: " +
                      default_text)
      ->check(CLI::IsMember({"floor", "up"}));
}

namespace {

void add_optimizer_flags(CLI::App& command, TrainCommandOptions& o) {
  command.add_option("--optimizer", o.optimizer, "sgd, adam or adamw (default adamw)")
      ->check(CLI::IsMember({"sgd", "adam", "adamw"}));
  command.add_option("--momentum", o.momentum, "sgd: momentum in [0, 1) (default 0)");
  command.add_flag("--nesterov", o.nesterov, "sgd: Nesterov momentum (needs --momentum)");
  command.add_option("--weight-decay", o.weight_decay,
                     "adamw: decoupled (default 0.01; language models 0.1 on matrices only); "
                     "sgd and adam: L2 penalty (default 0)");
  command
      .add_option("--betas", o.betas,
                  "adam and adamw: two values, e.g. --betas 0.9,0.95 "
                  "(default 0.9,0.999; language models 0.9,0.99)")
      ->expected(2)
      ->delimiter(',');
  command.add_option("--eps", o.eps, "adam and adamw (default 1e-8)");
  command
      .add_option("--schedule", o.schedule,
                  "constant, cosine or warmup-cosine (default: cosine for images, "
                  "warmup-cosine for text)")
      ->check(CLI::IsMember({"constant", "cosine", "warmup-cosine"}));
  command.add_option("--warmup-steps", o.warmup_steps,
                     "warmup-cosine: steps of linear warmup (default min(100, steps/10))");
  command.add_option("--min-lr", o.min_lr,
                     "cosine schedules: the final learning rate (default lr/100 for images, "
                     "lr/10 for text)");
  command.add_option("--clip-norm", o.clip_norm,
                     "clip the total gradient norm to this (default 1; 0: no clipping)");
}

void add_run_flags(CLI::App& command, TrainCommandOptions& o, bool compare) {
  command.add_option("--checkpoint-every", o.checkpoint_every,
                     "steps between checkpoints in the run folder (default: none; the newest 2 "
                     "are kept; SIGINT, SIGTERM or SIGHUP also writes one and exits 0)");
  command
      .add_option("--on-nonfinite", o.on_nonfinite,
                  "without loss scaling (fp32, amp-bf16, bf16, bf16-sr), a NaN or infinite "
                  "loss or gradient: stop (default: exit 2 naming the step, after a "
                  "checkpoint of the last good state with --checkpoint-every) or skip the "
                  "batch")
      ->check(CLI::IsMember({"stop", "skip"}));
  command.add_option("--min-loss-scale", o.min_loss_scale,
                     "the run has diverged when the loss scale falls below this (default "
                     "6.1e-05, fp16's smallest normal; 0: no floor)");
  command.add_option("--max-skipped-in-a-row", o.max_skipped_in_a_row,
                     "the run has diverged when more steps than this in a row are skipped "
                     "(default 25; 0: no limit)");
  command.add_option("--max-skipped-fraction", o.max_skipped_fraction,
                     "--on-nonfinite skip: the run has diverged when more than this fraction "
                     "of its steps were dropped (default 0.05; 1: no limit)");
  command.add_option("--max-memory", o.max_memory,
                     "refuse a run whose measured peak memory exceeds this many bytes, with K, "
                     "M, G or T for powers of 1024 (default: the memory this machine has free)");
  command.add_flag("--overwrite", o.overwrite,
                   "start even if the folder holds another run's files: delete them first");
  if (!compare) {
    command.add_option("--sample-every", o.sample_every,
                       "language models: print a sample of the model's text every this many "
                       "steps (default 0: none); the run itself is the same with or without");
    command.add_option("--sample-tokens", o.sample_tokens,
                       "characters per --sample-every sample (default 200)");
  }
  if (compare) {
    command.add_option("--from", o.from,
                       "rebuild the table, compare.json and compare.svg in --out from these "
                       "finished run folders, without training");
    command.add_flag("--resume", o.resume_compare,
                     "finish the compare in --out: finished precisions are kept, interrupted "
                     "ones resume from their checkpoints, the others start");
    return;
  }
  command.add_option("--resume", o.resume,
                     "continue the run in this folder from its newest valid checkpoint, with "
                     "the run's settings; with --steps (or --epochs) extend it to that many in "
                     "all. Of the other flags only --checkpoint-every, --eval-interval, "
                     "--log-interval, --threads, --on-nonfinite, --sample-every and "
                     "--sample-tokens may differ from them");
}

// "512M", "8G", "1073741824": bytes; 0 for an empty text.
int64_t parse_bytes(const std::string& text) {
  if (text.empty()) return 0;
  double number = 0;
  const char* end = text.data() + text.size();
  const auto [at, ec] = std::from_chars(text.data(), end, number);
  const std::string unit(at, end);
  const size_t index = unit.size() == 1 ? std::string("KMGT").find(unit) : std::string::npos;
  MIXP_CHECK(ec == std::errc() && number > 0 && (unit.empty() || index != std::string::npos),
             "--max-memory must be a positive number of bytes, with K, M, G or T, got '", text,
             "'");
  const size_t power = unit.empty() ? 0 : index + 1;
  const double bytes = number * std::pow(1024.0, double(power));
  MIXP_CHECK(bytes < 9.2e18, "--max-memory ", text, " is too large");
  return int64_t(bytes);
}

// An integer that fits its flag's variable (int64, or int for the shape flags and --threads).
CLI::Validator integer_in_range() {
  return CLI::Validator(
      [](std::string& text) -> std::string {
        int value = 0;
        const char* end = text.data() + text.size();
        const auto [at, ec] = std::from_chars(text.data(), end, value);
        if (ec == std::errc() && at == end) return "";
        return "must be an integer from " + std::to_string(std::numeric_limits<int>::min()) +
               " to " + std::to_string(std::numeric_limits<int>::max()) + ", got '" + text + "'";
      },
      "INTEGER");
}

// The flags' own ranges, so that the message names the flag (the library names the setting).
void check_optimizer_flags(const TrainCommandOptions& o) {
  auto at_least_zero = [](const char* flag, double v) {
    MIXP_CHECK(std::isfinite(v) && v >= 0, flag, " must be a number >= 0, got ", v);
  };
  MIXP_CHECK(!o.lr || (std::isfinite(*o.lr) && *o.lr > 0), "--lr must be positive, got ",
             o.lr.value_or(0));
  if (o.momentum) {
    at_least_zero("--momentum", *o.momentum);
    MIXP_CHECK(*o.momentum < 1, "--momentum must be below 1, got ", *o.momentum);
  }
  if (o.weight_decay) at_least_zero("--weight-decay", *o.weight_decay);
  if (o.eps) at_least_zero("--eps", *o.eps);
  for (const double b : o.betas)
    MIXP_CHECK(std::isfinite(b) && b >= 0 && b < 1, "--betas must be in [0, 1), got ", b);
  MIXP_CHECK(!o.warmup_steps || *o.warmup_steps >= 0, "--warmup-steps must be >= 0, got ",
             o.warmup_steps.value_or(0));
  if (o.min_lr) at_least_zero("--min-lr", *o.min_lr);
  at_least_zero("--clip-norm", o.clip_norm);
  at_least_zero("--min-loss-scale", o.min_loss_scale);
  MIXP_CHECK(o.max_skipped_in_a_row >= 0, "--max-skipped-in-a-row must be >= 0, got ",
             o.max_skipped_in_a_row);
  MIXP_CHECK(o.max_skipped_fraction >= 0 && o.max_skipped_fraction <= 1,
             "--max-skipped-fraction must be in [0, 1], got ", o.max_skipped_fraction);
}

}  // namespace

// A seed is a non-negative integer below 2^64: "-1" must not become 2^64 - 1.
uint64_t parse_seed(const std::string& text) {
  uint64_t seed = 0;
  const char* end = text.data() + text.size();
  const auto [at, ec] = std::from_chars(text.data(), end, seed);
  MIXP_CHECK(!text.empty() && ec == std::errc() && at == end,
             "--seed must be an integer from 0 to 18446744073709551615, got '", text, "'");
  return seed;
}

void add_train_flags(CLI::App& command, TrainCommandOptions& o, bool compare) {
  command.add_option("--model", o.model,
                     "mlp, cnn (images), lstm or gpt (characters), deep-mlp (synthetic)");
  command.add_option("--data", o.data,
                     "a folder of IDX files (classifiers; default "
                     "/usr/share/datasets/fashion-mnist) or a text file (language models; "
                     "default $MIXP_KJV, else data/kjv.txt from scripts/make-kjv.sh)");
  if (compare)
    command.add_option("--precisions", o.precisions,
                       "comma-separated presets, e.g. fp32,amp-bf16,amp-fp16 (needed unless "
                       "--from)");
  else
    command.add_option(
        "--precision", o.precision,
        "fp32, amp-bf16, amp-fp16, bf16, fp16, bf16-sr, fp8, fp8-current, mxfp8, fp8-block, "
        "fp8-e4m3-noscale, nvfp4, mxfp4 or fp4-e2m1-noscale (default fp32)");
  command
      .add_option("--optimizer-state", o.optimizer_state,
                  "the dtype of AdamW's moments: f32, or bf16 (rounded stochastically: half "
                  "the bytes). Default: bf16 under the bf16 and bf16-sr presets, else f32")
      ->check(CLI::IsMember({"f32", "bf16"}));
  add_mx_scale_rounding_flag(command, o.mx_scale_rounding,
                             amp::name_of(amp::kDefaultMxScaleRounding));
  command.add_option("--fp4-without", o.fp4_without,
                     "for ablations of nvfp4 and mxfp4: the ingredients to switch off, any of "
                     "2d-weights (weights in 1-D blocks), hadamard (no random Hadamard transform "
                     "in the weight gradient), sr (gradients rounded to nearest) and bf16-layers "
                     "(every Linear layer in FP4), comma-separated");
  CLI::Option* epochs =
      command.add_option("--epochs", o.epochs, "passes over the data (default 1)");
  CLI::Option* steps =
      command.add_option("--steps", o.steps, "optimizer steps, instead of --epochs");
  epochs->excludes(steps);
  command.add_option("--batch", o.batch, "batch size (default 64 for images, 16 for text)");
  command.add_option("--lr", o.lr, "peak learning rate (default 1e-3)");
  command.add_option("--seed", o.seed, "initialization, data order and rounding (default 0)");
  command.add_option("--threads", o.threads, "compute threads (default: all)");
  command.add_option("--out", o.out,
                     compare ? "output folder (default runs/compare-MODEL)"
                             : "run folder (default runs/MODEL-PRECISION)");
  command.add_option("--eval-interval", o.eval_interval,
                     "steps between evaluations (default: every epoch for images, steps/5 for "
                     "text)");
  command.add_option("--log-interval", o.log_interval, "steps per metrics line (default 10)");
  command.add_option("--grad-accum", o.grad_accum,
                     "split each batch into this many micro-batches, their gradients added: the "
                     "same step at the activation memory of one part (default 1)");
  if (!compare) {
    command.add_option("--reduce-dtype", o.reduce_dtype,
                       "under mpirun: the dtype the gradients are reduced in, f32 (default) or "
                       "bf16 (sent as bf16, added in fp32, rounded once: half the bytes)");
    command.add_flag("--deterministic", o.deterministic,
                     "under mpirun -np N: sum the gradients in rank order, so that the run is "
                     "bitwise one process with --grad-accum N");
    command.add_option("--bucket-mb", o.bucket_mb,
                       "under mpirun: MiB of gradients per reduction bucket (default 25; the "
                       "first bucket is 1 MiB or less)");
    command.add_option("--zero", o.zero,
                       "under mpirun: 1 partitions the optimizer state (moments, fp32 masters) "
                       "across the ranks, ZeRO stage 1: each keeps about 1/N; 0 (default): each "
                       "keeps all");
    command.add_flag("--check-replicas", o.check_replicas,
                     "under mpirun: after every step, check that every rank holds bitwise the "
                     "same weights (a hash, all-gathered)");
  }
  command.add_option("--layers", o.layers,
                     "gpt blocks (default 6), lstm layers (default 2) or deep-mlp hidden layers "
                     "(default 2)");
  command.add_option("--heads", o.heads, "gpt attention heads");
  command.add_option("--width", o.width,
                     "gpt embedding width (default 384) or lstm hidden size (default 256)");
  command.add_option(
      "--context", o.context,
      "language models: characters per sequence (default 256 for gpt, 128 for lstm)");
  command.add_option("--classes", o.classes,
                     "image classifiers: the number of classes, labels 0 to N-1 (default 10)");
  command.add_option("--val-fraction", o.val_fraction,
                     "text: the last fraction of the file that validates, in (0, 1) (default "
                     "0.1)");
  command.add_option("--init-from", o.init_from,
                     "start from a trained model's weights (a model.safetensors, checkpoint or "
                     "run folder) with a fresh optimizer: fine-tuning. The model and its shape "
                     "default to that model's");
  command.add_option("--underflow-growth", o.underflow_growth,
                     "loss-scaled presets (amp-fp16, fp16): also grow the loss scale when more "
                     "than this fraction of the scaled gradients would flush to zero in fp16, "
                     "never past the largest overflow-free scale seen (default 0: off)");
  command.add_option("--underflow-check-every", o.underflow_check_every,
                     "steps between the counts of --underflow-growth (default 1)");
  add_optimizer_flags(command, o);
  add_run_flags(command, o, compare);
  // CLI11 saturates an integer out of range (to 2^63 - 1 steps); these refuse it instead.
  for (const char* name : {"--epochs", "--steps", "--batch", "--threads", "--eval-interval",
                           "--log-interval", "--layers", "--heads", "--width", "--context",
                           "--underflow-check-every", "--checkpoint-every", "--warmup-steps",
                           "--max-skipped-in-a-row", "--classes", "--grad-accum"})
    command.get_option(name)->check(integer_in_range());
  if (!compare)
    for (const char* name : {"--sample-every", "--sample-tokens"})
      command.get_option(name)->check(integer_in_range());
}

TrainCommandOptions with_trained_model_shape(TrainCommandOptions o) {
  if (o.init_from.empty()) return o;
  const train::RunConfig trained = train::read_trained_weights(o.init_from).config;
  if (o.model.empty()) o.model = trained.model.name;
  if (o.model != trained.model.name) return o;  // the mismatch is listed when the weights load
  if (!o.layers) o.layers = trained.model.layers;
  if (!o.heads) o.heads = trained.model.heads;
  if (!o.width) o.width = trained.model.width;
  if (!o.context) o.context = trained.model.context;
  if (!o.classes && train::task_of(o.model) == nn::Task::classification)
    o.classes = trained.model.classes;
  return o;
}

train::RunConfig run_config(const TrainCommandOptions& o, const std::string& default_out) {
  MIXP_CHECK(!o.model.empty(), "--model is required (or --resume DIR, or --init-from MODEL)");
  MIXP_CHECK(!o.epochs || *o.epochs >= 1, "--epochs must be at least 1, got ", *o.epochs);
  MIXP_CHECK(!o.steps || *o.steps >= 1, "--steps must be at least 1, got ", *o.steps);
  MIXP_CHECK(o.batch >= 0, "--batch must be positive, got ", o.batch);
  MIXP_CHECK(o.threads >= 0, "--threads must be positive, got ", o.threads);
  MIXP_CHECK(o.log_interval >= 1, "--log-interval must be at least 1, got ", o.log_interval);
  MIXP_CHECK(o.eval_interval >= 0, "--eval-interval must be positive, got ", o.eval_interval);
  train::RunConfig c;
  c.model.name = o.model;
  const nn::Task task = train::task_of(o.model);
  if (o.model == "lstm") {  // a 2-layer character model; the other defaults are gpt's
    c.model.layers = 2;
    c.model.width = 256;
    c.model.context = 128;
  }
  if (o.model == "deep-mlp") {  // the shape of the loss-scaling test (tests/amp/paper_test.cpp)
    c.model.layers = 2;
    c.model.width = 64;
  }
  MIXP_CHECK(!o.classes || *o.classes >= 2, "--classes must be at least 2, got ",
             o.classes.value_or(0));
  if (o.classes) c.model.classes = *o.classes;
  MIXP_CHECK(!o.val_fraction || (*o.val_fraction > 0 && *o.val_fraction < 1),
             "--val-fraction must be in (0, 1), got ", o.val_fraction.value_or(0));
  if (o.val_fraction) c.val_fraction = *o.val_fraction;
  c.init_from = o.init_from;
  if (o.layers) c.model.layers = *o.layers;
  if (o.heads) c.model.heads = *o.heads;
  if (o.width) c.model.width = *o.width;
  if (o.context) c.model.context = *o.context;
  c.data = o.data;
  // The environment is read here, at the program's edge, not by the library.
  if (c.data.empty() && task == nn::Task::language_model)
    if (const char* env = std::getenv("MIXP_KJV"); env && *env) c.data = env;
  c.batch = o.batch;
  c.train.precision = o.precision;
  c.train.optimizer_state = o.optimizer_state;
  if (!o.mx_scale_rounding.empty())
    c.train.mx_scale_rounding = amp::parse_mx_scale_rounding(o.mx_scale_rounding);
  c.train.fp4_without = amp::parse_fp4_ablation(o.fp4_without);
  c.train.epochs = o.epochs.value_or(1);
  c.train.steps = o.steps.value_or(0);
  c.train.lr = o.lr;
  c.train.seed = parse_seed(o.seed);
  c.train.threads = o.threads;
  c.train.out_dir = o.out.empty() ? default_out : o.out;
  c.train.eval_interval = o.eval_interval;
  c.train.log_interval = o.log_interval;
  MIXP_CHECK(o.grad_accum >= 1, "--grad-accum must be at least 1, got ", o.grad_accum);
  c.train.grad_accum = o.grad_accum;
  c.train.parallel.reduce_dtype = o.reduce_dtype;
  c.train.parallel.deterministic = o.deterministic;
  MIXP_CHECK(std::isfinite(o.bucket_mb) && o.bucket_mb > 0 && o.bucket_mb <= 1024,
             "--bucket-mb must be in (0, 1024], got ", o.bucket_mb);
  c.train.parallel.bucket_bytes = std::max<int64_t>(1, int64_t(o.bucket_mb * 1024 * 1024));
  c.train.parallel.first_bucket_bytes = std::min(c.train.parallel.bucket_bytes, int64_t{1} << 20);
  c.train.parallel.check_replicas = o.check_replicas;
  MIXP_CHECK(o.zero == 0 || o.zero == 1, "--zero must be 0 or 1, got ", o.zero);
  c.train.parallel.zero = o.zero;
  c.train.on_nonfinite = train::parse_on_nonfinite(o.on_nonfinite);
  MIXP_CHECK(o.underflow_growth >= 0.0 && o.underflow_growth < 1.0,
             "--underflow-growth must be in [0, 1), got ", o.underflow_growth);
  MIXP_CHECK(o.underflow_check_every >= 1, "--underflow-check-every must be at least 1, got ",
             o.underflow_check_every);
  c.train.scaler_underflow_fraction = o.underflow_growth;
  c.train.scaler_underflow_check_interval = o.underflow_check_every;
  MIXP_CHECK(o.checkpoint_every >= 0, "--checkpoint-every must be positive, got ",
             o.checkpoint_every);
  c.train.checkpoint_every = o.checkpoint_every;
  MIXP_CHECK(o.sample_every >= 0, "--sample-every must be 0 (none) or more, got ", o.sample_every);
  MIXP_CHECK(o.sample_tokens >= 1, "--sample-tokens must be at least 1, got ", o.sample_tokens);
  c.train.sample_every = o.sample_every;
  c.train.sample_tokens = o.sample_tokens;
  c.train.overwrite = o.overwrite;
  c.train.max_memory = parse_bytes(o.max_memory);
  check_optimizer_flags(o);
  c.train.optimizer = {.name = o.optimizer,
                       .weight_decay = o.weight_decay,
                       .betas = {},
                       .eps = o.eps.value_or(1e-8),
                       .momentum = o.momentum.value_or(0.0),
                       .nesterov = o.nesterov};
  if (!o.betas.empty()) {
    MIXP_CHECK(o.betas.size() == 2, "--betas takes two values, e.g. 0.9,0.95");
    c.train.optimizer.betas = std::array<double, 2>{o.betas[0], o.betas[1]};
  }
  c.train.schedule = {.name = o.schedule, .warmup_steps = o.warmup_steps, .min_lr = o.min_lr};
  c.train.clip_norm = o.clip_norm;
  c.train.limits = {.min_loss_scale = o.min_loss_scale,
                    .max_skipped_in_a_row = o.max_skipped_in_a_row,
                    .max_skipped_fraction = o.max_skipped_fraction};
  train::validate_options(c.train);  // every flag, before anything is written
  return c;
}

void record_given_flags(const CLI::App& command, TrainCommandOptions& o) {
  o.given.clear();
  for (const CLI::Option* option : command.get_options())
    if (option->count() > 0 && !option->get_lnames().empty())
      o.given.push_back("--" + option->get_lnames().front());
}

namespace {

std::string text_of(const std::optional<double>& value) {
  std::ostringstream s;
  s << value.value_or(1e-3);  // TrainOptions' default learning rate
  return s.str();
}

// --resume with other flags: those that only change how the rest of the run is watched or
// paced are applied (and said); any other must equal the run's own setting, or the command
// stops (exit 2) naming the flag and both values, since it would silently start another run.
void apply_resume_flags(const TrainCommandOptions& o, train::RunConfig& c, std::FILE* out) {
  auto given = [&](const char* flag) {
    return std::find(o.given.begin(), o.given.end(), flag) != o.given.end();
  };
  // The flags as a fresh run of the same model would have set them, against the run's.
  TrainCommandOptions probe = o;
  if (!given("--model")) probe.model = c.model.name;
  const train::RunConfig fresh = run_config(probe, c.train.out_dir);
  auto same = [&](const char* flag, const std::string& asked, const std::string& stored) {
    MIXP_CHECK(!given(flag) || asked == stored, "--resume ", c.train.out_dir, ": ", flag, " ",
               asked, " differs from the run's ", stored,
               " (stored in its checkpoints); a resumed run keeps it. Leave the flag out, or "
               "start a new run in another folder");
  };
  auto number = [](auto v) { return std::to_string(v); };
  same("--model", o.model, c.model.name);
  auto absolute = [](const std::string& path) {
    return path.empty() ? path : std::filesystem::absolute(path).lexically_normal().string();
  };
  same("--data", absolute(o.data),
       absolute(c.data.empty() ? train::default_data_path(c.model.name) : c.data));
  same("--precision", o.precision, c.train.precision);
  same("--optimizer-state", o.optimizer_state, c.train.optimizer_state);
  same("--mx-scale-rounding", o.mx_scale_rounding, amp::name_of(c.train.mx_scale_rounding));
  same("--fp4-without", amp::name_of(amp::parse_fp4_ablation(o.fp4_without)),
       amp::name_of(c.train.fp4_without));
  if (given("--steps") || given("--epochs")) {  // extends (or ends sooner) the run
    c.train.steps = fresh.train.steps;
    c.train.epochs = fresh.train.epochs;
    c.train.extend = true;
  }
  same(
      "--init-from",
      o.init_from.empty() ? "" : std::filesystem::absolute(o.init_from).lexically_normal().string(),
      c.init_from);
  same("--classes", number(fresh.model.classes), number(c.model.classes));
  same("--val-fraction", text_of(fresh.val_fraction), text_of(c.val_fraction));
  same("--batch", number(o.batch), number(c.batch));
  same("--grad-accum", number(o.grad_accum), number(c.train.grad_accum));
  same("--reduce-dtype", o.reduce_dtype, c.train.parallel.reduce_dtype);
  if (given("--deterministic") && !c.train.parallel.deterministic)
    MIXP_CHECK(false,
               "--resume: the run was not started with --deterministic; it continues as it "
               "started");
  same("--bucket-mb", text_of(fresh.train.parallel.bucket_bytes / 1048576.0),
       text_of(c.train.parallel.bucket_bytes / 1048576.0));
  // A run resumes with or without ZeRO: a sharded checkpoint is put together whole first.
  if (given("--zero")) c.train.parallel.zero = o.zero;
  c.train.parallel.check_replicas = o.check_replicas;
  same("--lr", text_of(o.lr), text_of(c.train.lr));
  same("--seed", number(fresh.train.seed), number(c.train.seed));
  same("--optimizer", o.optimizer, c.train.optimizer.name);
  same("--schedule", o.schedule, c.train.schedule.name);
  same("--clip-norm", text_of(o.clip_norm), text_of(c.train.clip_norm));
  MIXP_CHECK(!o.overwrite, "--overwrite starts a new run; it does not go with --resume");
  same("--layers", number(fresh.model.layers), number(c.model.layers));
  same("--heads", number(fresh.model.heads), number(c.model.heads));
  same("--width", number(fresh.model.width), number(c.model.width));
  same("--context", number(fresh.model.context), number(c.model.context));
  same("--out", o.out, c.train.out_dir);
  std::ostringstream asked_fraction, stored_fraction;
  asked_fraction << o.underflow_growth;
  stored_fraction << c.train.scaler_underflow_fraction;
  same("--underflow-growth", asked_fraction.str(), stored_fraction.str());
  same("--underflow-check-every", number(o.underflow_check_every),
       number(c.train.scaler_underflow_check_interval));

  auto apply = [&](const char* flag, auto& setting, auto value, const char* note) {
    if (!given(flag) || setting == value) return;
    std::fprintf(out, "resume: %s %s instead of the run's %s%s\n", flag,
                 std::to_string(value).c_str(), std::to_string(setting).c_str(), note);
    setting = value;
  };
  MIXP_CHECK(o.checkpoint_every >= 0, "--checkpoint-every must be positive, got ",
             o.checkpoint_every);
  apply("--checkpoint-every", c.train.checkpoint_every, o.checkpoint_every, "");
  apply("--eval-interval", c.train.eval_interval, fresh.train.eval_interval, "");
  apply("--sample-every", c.train.sample_every, fresh.train.sample_every, "");
  apply("--sample-tokens", c.train.sample_tokens, fresh.train.sample_tokens, "");
  apply("--log-interval", c.train.log_interval, fresh.train.log_interval, "");
  apply("--threads", c.train.threads, fresh.train.threads,
        " (the sums split over other threads: the rest of the run may differ in the last bits "
        "from an uninterrupted one)");
  c.train.max_memory = fresh.train.max_memory;  // this machine's limit, not the run's
  apply("--min-loss-scale", c.train.limits.min_loss_scale, fresh.train.limits.min_loss_scale, "");
  apply("--max-skipped-in-a-row", c.train.limits.max_skipped_in_a_row,
        fresh.train.limits.max_skipped_in_a_row, "");
  apply("--max-skipped-fraction", c.train.limits.max_skipped_fraction,
        fresh.train.limits.max_skipped_fraction, "");
  const train::OnNonFinite policy = train::parse_on_nonfinite(o.on_nonfinite);
  if (given("--on-nonfinite") && policy != c.train.on_nonfinite) {
    std::fprintf(out, "resume: --on-nonfinite %s instead of the run's %s\n", train::name_of(policy),
                 train::name_of(c.train.on_nonfinite));
    c.train.on_nonfinite = policy;
  }
  std::fflush(out);
}

}  // namespace

int as_one_of_the_ranks(int rank, int ranks, const std::function<int()>& body) {
  if (ranks <= 1) return body();
  try {
    return body();
  } catch (const std::exception& e) {
    const auto* error = dynamic_cast<const Error*>(&e);
    const std::string text =
        error && !error->is_internal() ? error->message() : std::string(e.what());
    if (rank == 0)
      std::fprintf(stderr, "mixp train: %s\n", text.c_str());
    else
      std::fprintf(stderr, "mixp train (rank %d of %d): %s\n", rank, ranks, text.c_str());
  }
  std::fflush(stdout);
  std::fflush(stderr);
  // Not a return: unwinding would finalize MPI, which waits for ranks that may be blocked in a
  // collective with this one. mpirun ends them when a rank exits with a non-zero status.
  std::_Exit(2);
}

void refuse_several_processes() {
  const dist::Launch launch = dist::launch_from_environment();
  MIXP_CHECK(launch.world_size <= 1, "this process is rank ", launch.rank, " of ",
             launch.world_size,
             " started by mpirun, and mixp compare runs as one process: each rank would train "
             "alone. Run it without mpirun, or train one preset data-parallel with mpirun -np N "
             "mixp train");
}

namespace {

int train_as_rank(const TrainCommandOptions& o, std::FILE* out, dist::Communicator& comm,
                  bool& stopped) {
  train::RunConfig c;
  if (!o.resume.empty()) {
    c = train::resume_config(
        o.resume, [&](const std::string& why) { std::fprintf(stderr, "%s\n", why.c_str()); });
    apply_resume_flags(o, c, out);
  } else {
    const TrainCommandOptions resolved = with_trained_model_shape(o);
    c = run_config(resolved, "runs/" + resolved.model + "-" + o.precision);
  }
  train::ProgressPrinter progress(out);
  if (comm.rank() == 0) c.train.observer = &progress;  // rank 0 speaks for all
  c.train.parallel.communicator = &comm;
  c.train.stop_requested = [] { return stop_signal() != 0; };
  install_stop_handlers(comm.size() > 1);
  const train::TrainResult r = train::run_train(c);
  stopped = r.stopped;
  if (r.stopped) {
    if (comm.rank() != 0) return 0;
    std::fprintf(out,
                 "stopped by signal %d after step %lld: checkpoint %s; continue with "
                 "mixp train --resume %s\n",
                 stop_signal(), (long long)r.steps, r.last_checkpoint.c_str(),
                 c.train.out_dir.c_str());
    std::fflush(out);
    return 0;
  }
  if (comm.rank() == 0) std::fprintf(out, "run folder: %s\n", c.train.out_dir.c_str());
  return 0;
}

}  // namespace

int run_train_command(const TrainCommandOptions& o, std::FILE* out) {
  const std::unique_ptr<dist::Communicator> comm = dist::make_communicator();
  bool stopped = false;
  const int status = as_one_of_the_ranks(comm->rank(), comm->size(),
                                         [&] { return train_as_rank(o, out, *comm, stopped); });
  if (comm->size() > 1 && stopped && stop_signal() != SIGUSR1) {
    // Stopped by a signal with which mpirun ends the job: the checkpoint is written, and MPI's
    // finalize would wait on an mpirun that kills this rank meanwhile; leave at once instead.
    // (mpirun forwards SIGUSR1 and lets the job end by itself.)
    std::fflush(out);
    std::fflush(stderr);
    std::_Exit(status);
  }
  return status;
}

}  // namespace mixp::cli
