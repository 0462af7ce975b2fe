// mixp/io/checkpoint.h — the files of training checkpoints in a run folder.
//
// A checkpoint is one safetensors file (mixp/io/safetensors.h) named
// checkpoint-<step, 8 digits>.safetensors, e.g. checkpoint-00001200.safetensors. What it holds
// is the trainer's business (mixp/train/trainer.h); this file names, lists, writes and prunes
// them. Writes are atomic (write_file_atomically: temporary file, fsync, rename, fsync of the
// folder), and older checkpoints are deleted only once the new one is durable, so a crash at
// any point leaves at least the previous checkpoint whole. Temporary files (".checkpoint-...")
// and other names are never listed.
//
// Example:
//
//   mixp::io::write_checkpoint("runs/gpt", 1200, tensors, metadata, /*keep=*/2);
//   auto c = mixp::io::read_newest_checkpoint("runs/gpt", validate, [](const std::string& why) {
//     std::fprintf(stderr, "%s\n", why.c_str());
//   });
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "mixp/io/safetensors.h"

namespace mixp::io {

/// "checkpoint-00001200.safetensors" for step 1200.
std::string checkpoint_file_name(int64_t step);

/// The checkpoints in `dir` as (step, path), newest (highest step) first; none when the folder
/// does not exist.
std::vector<std::pair<int64_t, std::string>> list_checkpoints(const std::string& dir);

/// Writes the checkpoint of `step` into `dir` atomically, then deletes all but the newest
/// `keep` (>= 1) checkpoints and the temporary files that crashed writes left. Returns its
/// path. Throws mixp::Error naming the file.
std::string write_checkpoint(const std::string& dir, int64_t step,
                             const std::vector<std::pair<std::string, Tensor>>& tensors,
                             const std::map<std::string, std::string>& metadata, int keep = 2);

struct Checkpoint {
  int64_t step = 0;
  std::string path;
  SafetensorsFile file;
};

/// The newest checkpoint of `dir` that reads (read_safetensors validates it) and that
/// `validate` accepts (it throws mixp::Error to refuse one; may be empty). Each checkpoint
/// skipped is reported to `skipped` with the reason. Nothing when none is usable.
std::optional<Checkpoint> read_newest_checkpoint(
    const std::string& dir, const std::function<void(const Checkpoint&)>& validate,
    const std::function<void(const std::string&)>& skipped);

}  // namespace mixp::io
