// mixp compare: the same model, seed and data order under several precision presets.
#include <vector>

#include "commands.h"
#include "mixp/error.h"
#include "mixp/train/progress.h"
#include "mixp/train/run.h"
#include "signals.h"

namespace mixp::cli {

train::RunConfig run_config(const TrainCommandOptions& o, const std::string& default_out);

int run_compare_command(const TrainCommandOptions& given, std::FILE* out) {
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
