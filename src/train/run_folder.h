// The run folder of one training run: its lock, its id, and the files a run writes there.
#pragma once

#include <string>
#include <vector>

namespace mixp::train {

/// The names of the files a run writes that `dir` holds (run.json, metrics.jsonl,
/// summary.json, model.safetensors, loss.svg, checkpoints), sorted.
std::vector<std::string> run_files(const std::string& dir);

/// A fresh run id: 16 hex digits from the system's entropy and the clock.
std::string new_run_id();

/// The id in dir/run.json; "" when there is none (a folder of a run from before run ids).
std::string folder_run_id(const std::string& dir);

/// Holds the folder of one run, from the start of train() to its end: creates it, and locks
/// it (flock of dir/.lock, which holds the owner's process id) so that no second process writes
/// into it. For a new run, refuses a folder holding another run's files (naming them) unless
/// `overwrite`, which deletes them first. Throws mixp::Error; the destructor unlocks.
class RunFolder {
 public:
  RunFolder(const std::string& dir, bool resume, bool overwrite);
  ~RunFolder();
  RunFolder(const RunFolder&) = delete;
  RunFolder& operator=(const RunFolder&) = delete;

 private:
  int lock_fd_ = -1;
};

}  // namespace mixp::train
