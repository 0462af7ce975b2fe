// mixp compare: the same model, seed and data order under several precision presets.
#include <sstream>
#include <vector>

#include "commands.h"
#include "mixp/error.h"
#include "mixp/train/run.h"

namespace mixp::cli {

train::RunConfig run_config(const TrainCommandOptions& o, const std::string& default_out);

int run_compare_command(const TrainCommandOptions& o, std::FILE* out) {
  std::vector<std::string> precisions;
  std::stringstream list(o.precisions);
  for (std::string name; std::getline(list, name, ',');) {
    MIXP_CHECK(!name.empty(), "--precisions has an empty name in '", o.precisions, "'");
    precisions.push_back(name);
  }
  MIXP_CHECK(!precisions.empty(), "--precisions names no preset");
  train::RunConfig c = run_config(o, "runs/compare-" + o.model);
  c.train.log = out;
  train::run_compare(c, precisions);
  std::fprintf(out, "wrote %s/compare.json and %s/compare.svg\n", c.train.out_dir.c_str(),
               c.train.out_dir.c_str());
  return 0;
}

}  // namespace mixp::cli
