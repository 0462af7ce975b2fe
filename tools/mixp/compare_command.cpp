// mixp compare: the same model, seed and data order under several precision presets.
#include <vector>

#include "commands.h"
#include "mixp/error.h"
#include "mixp/train/progress.h"
#include "mixp/train/run.h"
#include "signals.h"

namespace mixp::cli {

train::RunConfig run_config(const TrainCommandOptions& o, const std::string& default_out);

namespace {

// --from: the comparison of finished runs, read back.
int compare_finished_runs(const TrainCommandOptions& o, std::FILE* out) {
  for (const std::string& flag : o.given)
    MIXP_CHECK(flag == "--from" || flag == "--out", "--from compares finished runs as they are; ",
               flag, " does not go with it");
  const std::string dir = o.out.empty() ? "runs/compare" : o.out;
  const train::CompareResult r = train::compare_finished(o.from, dir);
  std::fputs(train::compare_table(r).c_str(), out);
  std::fprintf(out, "wrote %s/compare.json and %s/compare.svg\n", dir.c_str(), dir.c_str());
  return 0;
}

}  // namespace

int run_compare_command(const TrainCommandOptions& given, std::FILE* out) {
  refuse_several_processes();
  if (!given.from.empty()) return compare_finished_runs(given, out);
  MIXP_CHECK(!given.precisions.empty(),
             "compare needs --precisions, or --from with finished run folders");
  const TrainCommandOptions o = with_trained_model_shape(given);
  const std::vector<std::string> precisions = parse_precisions(o.precisions, "--precisions");
  train::RunConfig c = run_config(o, "runs/compare-" + o.model);
  c.train.resume = o.resume_compare;
  MIXP_CHECK(!(o.resume_compare && o.overwrite),
             "--overwrite starts the compare anew; it does not go with --resume");
  train::ProgressPrinter progress(out);
  c.train.observer = &progress;
  c.train.stop_requested = [] { return stop_signal() != 0; };
  install_stop_handlers();
  const train::CompareResult r = train::run_compare(c, precisions);
  std::fputs(train::compare_table(r).c_str(), out);
  std::fprintf(out, "wrote %s/compare.json and %s/compare.svg\n", c.train.out_dir.c_str(),
               c.train.out_dir.c_str());
  if (r.stopped) {
    std::fprintf(out,
                 "stopped by signal %d; continue with mixp compare --resume and the same "
                 "flags\n",
                 stop_signal());
    return 0;
  }
  int failed = 0;
  for (const train::CompareRow& row : r.rows) failed += row.failed();
  MIXP_CHECK(failed == 0, failed, " of ", r.rows.size(),
             " precisions failed (see the table and compare.json); the others finished");
  return 0;
}

}  // namespace mixp::cli
