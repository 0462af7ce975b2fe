// mixp/io/checkpoint.h — the files of training checkpoints in a run folder.
//
// A checkpoint is one safetensors file (mixp/io/safetensors.h) named
// checkpoint-<step, 8 digits>.safetensors, e.g. checkpoint-00001200.safetensors, holding a
// StateDict (mixp/state_dict.h): its tensors by key, and in the metadata
//   "format"     "mixp-checkpoint"
//   "version"    kCheckpointVersion; a reader refuses a newer version, naming both
//   "run_id"     the run that wrote it: pruning and resuming consider only the run's own files
//   "step"       the step it was written after
//   "state"      the StateDict's values, a JSON object of strings
//   "checksums"  a JSON object: zlib's crc32 of every tensor's bytes, and of "state" under the
//                key "__state__"; read_checkpoint() verifies them all and names a tensor whose
//                bytes changed
// plus whatever metadata the writer adds. Version 1 files (without run id, state or checksums)
// still read; their tensors and metadata are the trainer's to interpret.
//
// A checkpoint of several processes that each hold a part of the state (ZeRO) also has one
// shard per rank, checkpoint-<step>.shard-<rank>-of-<ranks>.safetensors in the same format,
// written first; the checkpoint, written last, names them and their checksums in "shards", so
// that it exists only once they all do, and read_checkpoint_shards() refuses it when one is
// missing or is not the one it names.
//
// Writes are atomic (write_file_atomically: temporary file, fsync, rename, fsync of the
// folder), and older checkpoints are deleted only once the new one is durable, so a crash at
// any point leaves at least the previous checkpoint whole. Temporary files (".checkpoint-...")
// and other names are never listed.
//
// Example:
//
//   mixp::io::write_checkpoint("runs/gpt", 1200, run_id, state, {{"config", config}}, /*keep=*/2);
//   auto c = mixp::io::read_newest_checkpoint("runs/gpt", run_id, validate,
//                                             [](const std::string& why) { std::puts(why.c_str());
//                                             });
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "mixp/io/safetensors.h"
#include "mixp/state_dict.h"

namespace mixp::io {

/// The format version write_checkpoint() writes.
inline constexpr int kCheckpointVersion = 2;

/// "checkpoint-00001200.safetensors" for step 1200.
std::string checkpoint_file_name(int64_t step);

/// The checkpoints in `dir` as (step, path), newest (highest step) first; none when the folder
/// does not exist.
std::vector<std::pair<int64_t, std::string>> list_checkpoints(const std::string& dir);

/// The run id in the header of the checkpoint at `path` (read without its tensors): "" for a
/// version 1 file, nothing when the header does not read.
std::optional<std::string> checkpoint_run_id(const std::string& path);

/// Writes `state` as the checkpoint of `step` of run `run_id` into `dir` atomically, then
/// deletes all but the newest `keep` (>= 1) checkpoints of that run (other runs' files are
/// left alone) and the temporary files that crashed writes left. Returns its path. Throws
/// mixp::Error naming the file.
std::string write_checkpoint(const std::string& dir, int64_t step, const std::string& run_id,
                             const StateDict& state,
                             const std::map<std::string, std::string>& metadata, int keep = 2);

/// "checkpoint-00001200.shard-1-of-4.safetensors": the part of step 1200's checkpoint that
/// rank 1 of 4 holds alone (data parallelism with ZeRO: its pieces of the optimizer state).
std::string checkpoint_shard_file_name(int64_t step, int rank, int ranks);

/// Writes `state` as rank `rank`'s shard of the checkpoint of `step` into `dir` atomically, in
/// the checkpoint format (with "shard": "<rank>/<ranks>" in the metadata), and returns the
/// crc32 of the whole file, for the manifest. The checkpoint itself, written last by
/// write_checkpoint() with the metadata "shards" (a JSON array of {"file", "crc32"}, rank 0's
/// first), names every shard; write_checkpoint() prunes a checkpoint's shards with it, and
/// shards of this run whose checkpoint was never written.
uint32_t write_checkpoint_shard(const std::string& dir, int64_t step, const std::string& run_id,
                                int rank, int ranks, const StateDict& state);

struct Checkpoint {
  int64_t step = 0;
  std::string path;
  int version = 0;
  std::string run_id;    ///< "" for version 1
  SafetensorsFile file;  ///< every tensor and the metadata, as read
  StateDict state;       ///< version 2: the tensors and the "state" values
};

/// Reads and verifies the checkpoint at `path`: its format, its version (not newer than
/// kCheckpointVersion) and, from version 2, every checksum. Throws mixp::Error naming the
/// file and what is wrong (the tensor whose bytes do not match, both versions, ...).
Checkpoint read_checkpoint(const std::string& path);

/// The shards a checkpoint's manifest names (none without one), each read and verified: the
/// file exists beside it, its bytes have the manifest's crc32, it is the shard of that rank of
/// that step of that run. Throws mixp::Error naming the checkpoint and the shard that is
/// missing or does not match.
std::vector<Checkpoint> read_checkpoint_shards(const Checkpoint& checkpoint);

/// The newest checkpoint of `dir` whose run id is `run_id` (any, when empty), that
/// read_checkpoint() accepts and that `validate` accepts (it throws mixp::Error to refuse one;
/// may be empty). Each checkpoint skipped is reported to `skipped` with the reason. Nothing
/// when none is usable.
std::optional<Checkpoint> read_newest_checkpoint(
    const std::string& dir, const std::string& run_id,
    const std::function<void(const Checkpoint&)>& validate,
    const std::function<void(const std::string&)>& skipped);

}  // namespace mixp::io
