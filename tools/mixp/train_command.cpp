// mixp train: one model under one precision preset, into a run folder.
#include <CLI/CLI.hpp>
#include <algorithm>
#include <csignal>
#include <cstdlib>
#include <optional>
#include <sstream>

#include <signal.h>

#include "commands.h"
#include "mixp/error.h"
#include "mixp/train/run.h"

namespace mixp::cli {

void add_train_flags(CLI::App& command, TrainCommandOptions& o, bool compare) {
  CLI::Option* model = command.add_option(
      "--model", o.model, "mlp, cnn (images), lstm or gpt (characters), deep-mlp (synthetic)");
  if (compare) model->required();
  command.add_option("--data", o.data,
                     "a folder of IDX files (classifiers; default "
                     "/usr/share/datasets/fashion-mnist) or a text file (language models; "
                     "default $MIXP_KJV, else data/kjv.txt from scripts/make-kjv.sh)");
  if (compare)
    command
        .add_option("--precisions", o.precisions,
                    "comma-separated presets, e.g. fp32,amp-bf16,amp-fp16")
        ->required();
  else
    command.add_option(
        "--precision", o.precision,
        "fp32, amp-bf16, amp-fp16, bf16, fp16, bf16-sr, fp8, fp8-current, mxfp8, fp8-block or "
        "fp8-e4m3-noscale (default fp32)");
  command
      .add_option("--optimizer-state", o.optimizer_state,
                  "the dtype of AdamW's moments: f32, or bf16 (rounded stochastically: half "
                  "the bytes). Default: bf16 under the bf16 and bf16-sr presets, else f32")
      ->check(CLI::IsMember({"f32", "bf16"}));
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
  command.add_option("--layers", o.layers,
                     "gpt blocks (default 6), lstm layers (default 2) or deep-mlp hidden layers "
                     "(default 2)");
  command.add_option("--heads", o.heads, "gpt attention heads");
  command.add_option("--width", o.width,
                     "gpt embedding width (default 384) or lstm hidden size (default 256)");
  command.add_option(
      "--context", o.context,
      "language models: characters per sequence (default 256 for gpt, 128 for lstm)");
  command.add_option("--underflow-growth", o.underflow_growth,
                     "loss-scaled presets (amp-fp16, fp16): also grow the loss scale when more "
                     "than this fraction of the scaled gradients would flush to zero in fp16, "
                     "never past the largest overflow-free scale seen (default 0: off)");
  command.add_option("--underflow-check-every", o.underflow_check_every,
                     "steps between the counts of --underflow-growth (default 1)");
  if (!compare) {
    command.add_option("--checkpoint-every", o.checkpoint_every,
                       "steps between checkpoints in the run folder (default: none; the "
                       "newest 2 are kept; SIGINT or SIGTERM also writes one and exits 0)");
    command.add_option("--resume", o.resume,
                       "continue the run in this folder from its newest valid checkpoint, with "
                       "the run's settings; of the other flags only --checkpoint-every, "
                       "--eval-interval, --log-interval, --threads and --on-nonfinite may "
                       "differ from them");
    command.add_option("--on-nonfinite", o.on_nonfinite,
                       "without loss scaling (fp32, amp-bf16, bf16, bf16-sr), a NaN or infinite "
                       "loss or gradient: stop (default: exit 2 naming the step, after a "
                       "checkpoint of the last good state with --checkpoint-every) or skip the "
                       "batch");
  }
}

train::RunConfig run_config(const TrainCommandOptions& o, const std::string& default_out) {
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
  c.train.epochs = o.epochs.value_or(1);
  c.train.steps = o.steps.value_or(0);
  c.train.lr = o.lr;
  c.train.seed = o.seed;
  c.train.threads = o.threads;
  c.train.out_dir = o.out.empty() ? default_out : o.out;
  c.train.eval_interval = o.eval_interval;
  c.train.log_interval = o.log_interval;
  c.train.on_nonfinite = train::parse_on_nonfinite(o.on_nonfinite);
  MIXP_CHECK(o.underflow_growth >= 0.0 && o.underflow_growth < 1.0,
             "--underflow-growth must be in [0, 1), got ", o.underflow_growth);
  MIXP_CHECK(o.underflow_check_every >= 1, "--underflow-check-every must be at least 1, got ",
             o.underflow_check_every);
  c.train.scaler_underflow_fraction = o.underflow_growth;
  c.train.scaler_underflow_check_interval = o.underflow_check_every;
  return c;
}

namespace {

// Set by SIGINT and SIGTERM; the trainer reads it after every step.
volatile std::sig_atomic_t stop_signal = 0;
extern "C" void on_stop_signal(int signal) { stop_signal = signal; }

void install_stop_handlers() {
  struct sigaction action {};
  action.sa_handler = on_stop_signal;
  sigemptyset(&action.sa_mask);
  action.sa_flags = SA_RESTART;
  ::sigaction(SIGINT, &action, nullptr);
  ::sigaction(SIGTERM, &action, nullptr);
}

}  // namespace

void record_given_flags(const CLI::App& command, TrainCommandOptions& o) {
  o.given.clear();
  for (const CLI::Option* option : command.get_options())
    if (option->count() > 0 && !option->get_lnames().empty())
      o.given.push_back("--" + option->get_lnames().front());
}

namespace {

std::string text_of(const std::optional<double>& lr) {
  std::ostringstream s;
  s << lr.value_or(1e-3);  // TrainOptions' default
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
  same("--data", o.data, c.data.empty() ? train::default_data_path(c.model.name) : c.data);
  same("--precision", o.precision, c.train.precision);
  same("--optimizer-state", o.optimizer_state, c.train.optimizer_state);
  same("--epochs", number(fresh.train.epochs), number(c.train.epochs));
  same("--steps", number(fresh.train.steps), number(c.train.steps));
  same("--batch", number(o.batch), number(c.batch));
  same("--lr", text_of(o.lr), text_of(c.train.lr));
  same("--seed", number(o.seed), number(c.train.seed));
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
  apply("--log-interval", c.train.log_interval, fresh.train.log_interval, "");
  apply("--threads", c.train.threads, fresh.train.threads,
        " (the sums split over other threads: the rest of the run may differ in the last bits "
        "from an uninterrupted one)");
  const train::OnNonFinite policy = train::parse_on_nonfinite(o.on_nonfinite);
  if (given("--on-nonfinite") && policy != c.train.on_nonfinite) {
    std::fprintf(out, "resume: --on-nonfinite %s instead of the run's %s\n", train::name_of(policy),
                 train::name_of(c.train.on_nonfinite));
    c.train.on_nonfinite = policy;
  }
  std::fflush(out);
}

}  // namespace

int run_train_command(const TrainCommandOptions& o, std::FILE* out) {
  train::RunConfig c;
  if (!o.resume.empty()) {
    c = train::resume_config(
        o.resume, [&](const std::string& why) { std::fprintf(stderr, "%s\n", why.c_str()); });
    apply_resume_flags(o, c, out);
  } else {
    MIXP_CHECK(!o.model.empty(), "train: --model is required (or --resume DIR)");
    MIXP_CHECK(o.checkpoint_every >= 0, "--checkpoint-every must be positive, got ",
               o.checkpoint_every);
    c = run_config(o, "runs/" + o.model + "-" + o.precision);
    c.train.checkpoint_every = o.checkpoint_every;
  }
  c.train.log = out;
  c.train.stop_requested = [] { return stop_signal != 0; };
  install_stop_handlers();
  const train::TrainResult r = train::run_train(c);
  if (r.stopped) {
    std::fprintf(out,
                 "stopped by signal %d after step %lld: checkpoint %s; continue with "
                 "mixp train --resume %s\n",
                 int(stop_signal), (long long)r.steps, r.last_checkpoint.c_str(),
                 c.train.out_dir.c_str());
    std::fflush(out);
    return 0;
  }
  std::fprintf(out, "run folder: %s\n", c.train.out_dir.c_str());
  return 0;
}

}  // namespace mixp::cli
