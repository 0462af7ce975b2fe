// mixp eval: a trained model over a whole evaluation split, under one or several presets.
#include <CLI/CLI.hpp>
#include <sstream>

#include "commands.h"
#include "mixp/error.h"
#include "mixp/train/evaluate.h"

namespace mixp::cli {

std::vector<std::string> parse_precisions(const std::string& text, const char* flag) {
  std::vector<std::string> precisions;
  std::stringstream list(text);
  for (std::string name; std::getline(list, name, ',');) {
    MIXP_CHECK(!name.empty(), flag, " has an empty name in '", text, "'");
    precisions.push_back(name);
  }
  MIXP_CHECK(!precisions.empty(), flag, " names no preset");
  return precisions;
}

void add_eval_flags(CLI::App& command, EvalCommandOptions& o) {
  command
      .add_option("run", o.path,
                  "a run folder, its model.safetensors, or a checkpoint-N.safetensors")
      ->required();
  command.add_option("--data", o.data,
                     "other data: a folder of IDX files (its test set) or a text file (all of "
                     "it); default: the run's own evaluation split");
  CLI::Option* one =
      command.add_option("--precision", o.precision, "a preset (default: the run's own)");
  CLI::Option* several = command.add_option(
      "--precisions", o.precisions,
      "comma-separated presets, one table row each, e.g. fp32,amp-bf16,amp-fp16,fp8,mxfp8");
  one->excludes(several);
  command.add_option("--batch", o.batch, "batch size (default: the run's)")
      ->check(CLI::Range(int64_t{1}, int64_t{1} << 30));
  command.add_option("--threads", o.threads, "compute threads (default: the run's, else all)")
      ->check(CLI::Range(1, 1 << 16));
  command.add_flag("--json", o.json, "print the report as JSON instead of a table");
  add_mx_scale_rounding_flag(command, o.mx_scale_rounding, "the run's own");
}

int run_eval_command(const EvalCommandOptions& o, std::FILE* out) {
  train::EvalRequest request{
      .data = o.data, .precisions = {}, .batch = o.batch, .threads = o.threads};
  if (!o.precision.empty()) request.precisions = {o.precision};
  if (!o.precisions.empty()) request.precisions = parse_precisions(o.precisions, "--precisions");
  if (!o.mx_scale_rounding.empty())
    request.mx_scale_rounding = amp::parse_mx_scale_rounding(o.mx_scale_rounding);
  const train::EvalReport report = train::evaluate_trained(o.path, request);
  std::fputs((o.json ? train::eval_json(report) : train::eval_table(report)).c_str(), out);
  std::fflush(out);
  int failed = 0;
  for (const train::EvalRow& row : report.rows) failed += row.metrics ? 0 : 1;
  MIXP_CHECK(failed == 0, failed, " of ", report.rows.size(),
             " precisions failed (see the table); the others are reported");
  return 0;
}

}  // namespace mixp::cli
