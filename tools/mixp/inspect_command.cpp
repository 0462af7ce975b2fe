// mixp inspect: where a model's gradients fall in fp16's range, per layer.
#include <CLI/CLI.hpp>
#include <algorithm>
#include <filesystem>
#include <sstream>

#include "commands.h"
#include "mixp/error.h"
#include "mixp/format.h"
#include "mixp/train/inspect.h"

namespace mixp::cli {

train::RunConfig run_config(const TrainCommandOptions& o, const std::string& default_out);

void add_inspect_flags(CLI::App& command, InspectCommandOptions& o) {
  TrainCommandOptions& t = o.train;
  command.add_option("--model", t.model, "mlp, cnn, lstm, gpt or deep-mlp (needed unless --from)");
  command.add_option("--from", o.from,
                     "inspect a trained model: a run folder (its model.safetensors, else its "
                     "newest checkpoint), a model.safetensors or a checkpoint; the model, data, "
                     "batch and seed are the run's, and its folder is left as it is");
  command.add_option("--precision", t.precision,
                     "the preset to train under: fp32, amp-bf16, amp-fp16, bf16, fp16, bf16-sr "
                     "(default fp32; with --from, the run's)");
  command.add_option("--steps", t.steps,
                     "training steps before the inspected step (default 20, with --from 0; 0: "
                     "inspect the initialization or the trained weights)");
  command.add_option("--every", o.every, "training steps between collections (default 10)");
  command.add_option("--formats", o.formats,
                     "more formats to test every tensor against, besides fp16, bf16, e4m3 and "
                     "e5m2: comma-separated names of 'mixp formats' or eXmY (in inspect.json)");
  command.add_option("--block-formats", o.block_formats,
                     "block-scaled presets (mxfp8, fp8-block, nvfp4, mxfp4), comma-separated: "
                     "per Linear layer, what each one's recipe does to the input, weight and "
                     "output gradient of the inspected step, block by block (scale binades, "
                     "saturated and flushed blocks, error against bf16; also in inspect.json and "
                     "block_scales.csv)");
  command.add_option("--out", t.out,
                     "folder for inspect.json and the SVG histograms (default "
                     "runs/inspect-MODEL-PRECISION)");
  command.add_option("--data", t.data, "as for mixp train");
  command.add_option("--batch", t.batch, "as for mixp train");
  command.add_option("--lr", t.lr, "as for mixp train");
  command.add_option("--seed", t.seed, "as for mixp train (default 0)");
  command.add_option("--threads", t.threads, "compute threads (default: all)");
  command.add_option("--layers", t.layers, "as for mixp train");
  command.add_option("--heads", t.heads, "as for mixp train");
  command.add_option("--width", t.width, "as for mixp train");
  command.add_option("--context", t.context, "as for mixp train");
  add_mx_scale_rounding_flag(
      command, t.mx_scale_rounding,
      std::string(amp::name_of(amp::kDefaultMxScaleRounding)) + " (with --from: the run's own)");
}

namespace {

bool given(const TrainCommandOptions& o, const std::string& flag) {
  return std::find(o.given.begin(), o.given.end(), flag) != o.given.end();
}

// --from: the run's model, data, batch and seed; the preset, steps and threads may be asked.
train::InspectOptions trained_model_options(const InspectCommandOptions& o, int64_t steps) {
  for (const char* flag : {"--model", "--data", "--batch", "--lr", "--seed", "--layers", "--heads",
                           "--width", "--context"})
    MIXP_CHECK(!given(o.train, flag), flag, " does not go with --from: the model, its data and ",
               "its training settings are the run's");
  train::InspectOptions options;
  options.from = o.from;
  options.run.train.precision = given(o.train, "--precision") ? o.train.precision : "";
  options.run.train.steps = steps;
  options.run.train.threads = o.train.threads;
  if (!o.train.mx_scale_rounding.empty())
    options.mx_scale_rounding = amp::parse_mx_scale_rounding(o.train.mx_scale_rounding);
  return options;
}

}  // namespace

int run_inspect_command(const InspectCommandOptions& o, std::FILE* out) {
  MIXP_CHECK(o.every >= 1, "--every must be at least 1, got ", o.every);
  const int64_t steps = o.train.steps.value_or(o.from.empty() ? 20 : 0);
  MIXP_CHECK(steps >= 0, "--steps must be at least 0, got ", steps);
  train::InspectOptions options;
  if (o.from.empty()) {
    MIXP_CHECK(!o.train.model.empty(), "--model is required (or --from RUN)");
    TrainCommandOptions t = o.train;
    t.steps.reset();  // run_config wants >= 1; inspect also takes 0
    options.run = run_config(t, "");
    options.run.train.steps = steps;
  } else {
    options = trained_model_options(o, steps);
  }
  options.every = o.every;
  std::stringstream list(o.formats);
  for (std::string name; std::getline(list, name, ',');) {
    MIXP_CHECK(!name.empty(), "--formats has an empty name in '", o.formats, "'");
    options.extra_formats.push_back(parse_format(name));
  }
  std::stringstream block_list(o.block_formats);
  for (std::string name; std::getline(block_list, name, ',');) {
    MIXP_CHECK(!name.empty(), "--block-formats has an empty name in '", o.block_formats, "'");
    options.block_formats.push_back(name);
  }
  std::filesystem::path from = std::filesystem::path(o.from).lexically_normal();
  if (from.filename().empty()) from = from.parent_path();  // "runs/cnn/"
  const std::string default_out = o.from.empty()
                                      ? "runs/inspect-" + o.train.model + "-" + o.train.precision
                                      : "runs/inspect-" + from.stem().string();
  options.out_dir = o.train.out.empty() ? default_out : o.train.out;
  const train::InspectResult r = train::run_inspect(options);
  std::fputs(train::inspect_table(r).c_str(), out);
  std::fprintf(out, "wrote %s/inspect.json, %s/activation_gradients.svg and %s/layers/*.svg\n",
               options.out_dir.c_str(), options.out_dir.c_str(), options.out_dir.c_str());
  if (!r.block_scales.empty())
    std::fprintf(out, "wrote %s/block_scales.csv\n", options.out_dir.c_str());
  return 0;
}

}  // namespace mixp::cli
