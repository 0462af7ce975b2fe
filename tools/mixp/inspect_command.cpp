// mixp inspect: where a model's gradients fall in fp16's range, per layer.
#include <CLI/CLI.hpp>
#include <sstream>

#include "commands.h"
#include "mixp/error.h"
#include "mixp/format.h"
#include "mixp/train/inspect.h"

namespace mixp::cli {

train::RunConfig run_config(const TrainCommandOptions& o, const std::string& default_out);

void add_inspect_flags(CLI::App& command, InspectCommandOptions& o) {
  TrainCommandOptions& t = o.train;
  command.add_option("--model", t.model, "mlp, cnn, lstm, gpt or deep-mlp")->required();
  command.add_option("--precision", t.precision,
                     "the preset to train under: fp32, amp-bf16, amp-fp16, bf16, fp16, bf16-sr "
                     "(default fp32)");
  command.add_option("--steps", t.steps,
                     "training steps before the inspected step (default 20; 0: inspect the "
                     "initialization)");
  command.add_option("--every", o.every, "training steps between collections (default 10)");
  command.add_option("--formats", o.formats,
                     "more formats to test every tensor against, besides fp16, bf16, e4m3 and "
                     "e5m2: comma-separated names of 'mixp formats' or eXmY (in inspect.json)");
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
}

int run_inspect_command(const InspectCommandOptions& o, std::FILE* out) {
  MIXP_CHECK(o.every >= 1, "--every must be at least 1, got ", o.every);
  const int64_t steps = o.train.steps.value_or(20);
  MIXP_CHECK(steps >= 0, "--steps must be at least 0, got ", steps);
  TrainCommandOptions t = o.train;
  t.steps.reset();  // run_config wants >= 1; inspect also takes 0
  train::InspectOptions options;
  options.run = run_config(t, "");
  options.run.train.steps = steps;
  options.every = o.every;
  std::stringstream list(o.formats);
  for (std::string name; std::getline(list, name, ',');) {
    MIXP_CHECK(!name.empty(), "--formats has an empty name in '", o.formats, "'");
    options.extra_formats.push_back(parse_format(name));
  }
  options.out_dir =
      o.train.out.empty() ? "runs/inspect-" + o.train.model + "-" + o.train.precision : o.train.out;
  const train::InspectResult r = train::run_inspect(options);
  std::fputs(train::inspect_table(r).c_str(), out);
  std::fprintf(out, "wrote %s/inspect.json, %s/activation_gradients.svg and %s/layers/*.svg\n",
               options.out_dir.c_str(), options.out_dir.c_str(), options.out_dir.c_str());
  return 0;
}

}  // namespace mixp::cli
