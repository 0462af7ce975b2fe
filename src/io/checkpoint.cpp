// Naming, listing, writing and pruning the checkpoints of a run folder.
#include "mixp/io/checkpoint.h"

#include <zlib.h>

#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>

#include "mixp/error.h"

namespace mixp::io {
namespace {

constexpr std::string_view kPrefix = "checkpoint-", kSuffix = ".safetensors";
constexpr const char* kFormat = "mixp-checkpoint";
constexpr const char* kStateChecksumKey = "__state__";

uint32_t crc32_of(const void* data, size_t size) {
  uLong crc = ::crc32(0L, Z_NULL, 0);
  const auto* bytes = static_cast<const Bytef*>(data);
  while (size > 0) {  // zlib takes at most a uInt at a time
    const uInt chunk = uInt(std::min<size_t>(size, 1u << 30));
    crc = ::crc32(crc, bytes, chunk);
    bytes += chunk;
    size -= chunk;
  }
  return uint32_t(crc);
}
uint32_t crc32_of(const Tensor& t) { return crc32_of(t.raw_data(), t.nbytes()); }

std::string metadata_value(const SafetensorsFile& file, const std::string& path,
                           const std::string& key) {
  const auto it = file.metadata.find(key);
  MIXP_CHECK(it != file.metadata.end(), path, ": no '", key, "' in the metadata");
  return it->second;
}

// The metadata of the file's header, without reading its tensors; nothing when the header
// does not read.
std::optional<std::map<std::string, std::string>> header_metadata(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  uint64_t size = 0;
  if (!in.read(reinterpret_cast<char*>(&size), sizeof size) || size > kMaxSafetensorsHeader)
    return std::nullopt;
  std::string header(size, '\0');
  if (!in.read(header.data(), std::streamsize(size))) return std::nullopt;
  const nlohmann::json j = nlohmann::json::parse(header, nullptr, /*allow_exceptions=*/false);
  if (!j.is_object()) return std::nullopt;
  std::map<std::string, std::string> out;
  if (!j.contains("__metadata__") || !j["__metadata__"].is_object()) return out;
  for (const auto& [k, v] : j["__metadata__"].items())
    if (v.is_string()) out[k] = v.get<std::string>();
  return out;
}

int parse_version(const std::string& path, const std::string& text) {
  int version = 0;
  for (const char c : text) {
    MIXP_CHECK(c >= '0' && c <= '9' && version < 100000, path, ": format version '", text,
               "' is not a number");
    version = version * 10 + (c - '0');
  }
  MIXP_CHECK(!text.empty() && version >= 1, path, ": format version '", text, "' is not valid");
  MIXP_CHECK(version <= kCheckpointVersion, path, ": checkpoint format version ", version,
             " is newer than this mixp reads (version ", kCheckpointVersion,
             "); resume it with a newer mixp");
  return version;
}

// Version 2: every tensor's bytes and the state's text against "checksums".
void verify_checksums(const Checkpoint& c, const std::string& state_text) {
  nlohmann::json sums;
  try {
    sums = nlohmann::json::parse(metadata_value(c.file, c.path, "checksums"));
  } catch (const nlohmann::json::exception&) {
    MIXP_CHECK(false, c.path, ": its checksums are not readable");
  }
  MIXP_CHECK(sums.is_object(), c.path, ": its checksums are not readable");
  auto expected = [&](const std::string& name) {
    MIXP_CHECK(sums.contains(name) && sums[name].is_number_unsigned(), c.path,
               ": no checksum for '", name, "'");
    return sums[name].get<uint32_t>();
  };
  for (const auto& [name, t] : c.file.tensors)
    MIXP_CHECK(crc32_of(t) == expected(name), c.path, ": tensor '", name,
               "' is corrupt (its bytes do not match the checksum written with them)");
  MIXP_CHECK(crc32_of(state_text.data(), state_text.size()) == expected(kStateChecksumKey), c.path,
             ": the saved state values are corrupt (they do not match their checksum)");
  MIXP_CHECK(sums.size() == c.file.tensors.size() + 1, c.path, ": ", sums.size() - 1,
             " checksums for ", c.file.tensors.size(), " tensors: a tensor is missing");
}

// The step of a checkpoint's file name, or nothing for any other name.
std::optional<int64_t> step_of(const std::string& name) {
  if (name.size() <= kPrefix.size() + kSuffix.size() || !name.starts_with(kPrefix) ||
      !name.ends_with(kSuffix))
    return std::nullopt;
  const std::string digits =
      name.substr(kPrefix.size(), name.size() - kPrefix.size() - kSuffix.size());
  if (digits.empty() || digits.size() > 18) return std::nullopt;
  int64_t step = 0;
  for (const char c : digits) {
    if (c < '0' || c > '9') return std::nullopt;
    step = step * 10 + (c - '0');
  }
  return step;
}

}  // namespace

std::string checkpoint_file_name(int64_t step) {
  MIXP_CHECK(step >= 0, "checkpoint: the step must be >= 0, got ", step);
  char buf[64];
  std::snprintf(buf, sizeof buf, "checkpoint-%08lld.safetensors", (long long)step);
  return buf;
}

std::vector<std::pair<int64_t, std::string>> list_checkpoints(const std::string& dir) {
  namespace fs = std::filesystem;
  std::vector<std::pair<int64_t, std::string>> found;
  std::error_code ec;
  if (!fs::is_directory(dir, ec)) return found;
  for (const fs::directory_entry& e : fs::directory_iterator(dir, ec)) {
    if (!e.is_regular_file(ec)) continue;
    if (const auto step = step_of(e.path().filename().string()))
      found.emplace_back(*step, e.path().string());
  }
  std::sort(found.begin(), found.end(), [](const auto& a, const auto& b) { return a > b; });
  return found;
}

std::optional<std::string> checkpoint_run_id(const std::string& path) {
  const auto metadata = header_metadata(path);
  if (!metadata) return std::nullopt;
  const auto it = metadata->find("run_id");
  return it == metadata->end() ? "" : it->second;
}

std::string checkpoint_shard_file_name(int64_t step, int rank, int ranks) {
  MIXP_CHECK(step >= 0 && rank >= 0 && rank < ranks, "checkpoint shard: step ", step, ", rank ",
             rank, " of ", ranks, " is not valid");
  char buf[96];
  std::snprintf(buf, sizeof buf, "checkpoint-%08lld.shard-%d-of-%d.safetensors", (long long)step,
                rank, ranks);
  return buf;
}

namespace {

// A checkpoint file in the checkpoint format: tensors, their checksums, the state values.
void write_checkpoint_file(const std::string& path, int64_t step, const std::string& run_id,
                           const StateDict& state,
                           const std::map<std::string, std::string>& metadata) {
  std::vector<std::pair<std::string, Tensor>> tensors(state.tensors.begin(), state.tensors.end());
  nlohmann::json sums = nlohmann::json::object();
  for (const auto& [name, t] : tensors) sums[name] = crc32_of(t);
  const std::string state_text = nlohmann::json(state.values).dump();
  sums[kStateChecksumKey] = crc32_of(state_text.data(), state_text.size());
  std::map<std::string, std::string> all = metadata;
  all["format"] = kFormat;
  all["version"] = std::to_string(kCheckpointVersion);
  all["run_id"] = run_id;
  all["step"] = std::to_string(step);
  all["state"] = state_text;
  all["checksums"] = sums.dump();
  write_safetensors(path, tensors, all);  // durable once this returns
}

uint32_t crc32_of_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  MIXP_CHECK(in, "cannot read ", path);
  uLong crc = ::crc32(0L, Z_NULL, 0);
  std::vector<char> buffer(1 << 20);
  while (in.read(buffer.data(), std::streamsize(buffer.size())) || in.gcount() > 0)
    crc = ::crc32(crc, reinterpret_cast<const Bytef*>(buffer.data()), uInt(in.gcount()));
  return uint32_t(crc);
}

// The step of a shard's file name ("checkpoint-<step>.shard-..."), or nothing.
std::optional<int64_t> shard_step_of(const std::string& name) {
  const size_t dot = name.find(".shard-");
  if (!name.starts_with(kPrefix) || dot == std::string::npos || !name.ends_with(kSuffix))
    return std::nullopt;
  return step_of(name.substr(0, dot) + std::string(kSuffix));
}

// This run's shards whose checkpoint is not among `kept` (pruned, or never written).
void prune_shards(const std::string& dir, const std::string& run_id,
                  const std::vector<int64_t>& kept) {
  namespace fs = std::filesystem;
  std::error_code ec;
  for (const fs::directory_entry& e : fs::directory_iterator(dir, ec)) {
    const std::optional<int64_t> step = shard_step_of(e.path().filename().string());
    if (!step || std::find(kept.begin(), kept.end(), *step) != kept.end()) continue;
    if (checkpoint_run_id(e.path().string()) == run_id) fs::remove(e.path(), ec);
  }
}

}  // namespace

uint32_t write_checkpoint_shard(const std::string& dir, int64_t step, const std::string& run_id,
                                int rank, int ranks, const StateDict& state) {
  MIXP_CHECK(!run_id.empty(), "checkpoint: a run id is needed");
  std::filesystem::create_directories(dir);
  const std::string path =
      (std::filesystem::path(dir) / checkpoint_shard_file_name(step, rank, ranks)).string();
  write_checkpoint_file(path, step, run_id, state,
                        {{"shard", std::to_string(rank) + "/" + std::to_string(ranks)}});
  return crc32_of_file(path);
}

std::string write_checkpoint(const std::string& dir, int64_t step, const std::string& run_id,
                             const StateDict& state,
                             const std::map<std::string, std::string>& metadata, int keep) {
  namespace fs = std::filesystem;
  MIXP_CHECK(keep >= 1, "checkpoint: keep must be >= 1, got ", keep);
  MIXP_CHECK(!run_id.empty(), "checkpoint: a run id is needed");
  fs::create_directories(dir);
  const std::string path = (fs::path(dir) / checkpoint_file_name(step)).string();
  write_checkpoint_file(path, step, run_id, state, metadata);
  int kept = 0;
  std::vector<int64_t> kept_steps;
  for (const auto& [other_step, other] : list_checkpoints(dir)) {
    if (checkpoint_run_id(other) != run_id) continue;  // another run's: not ours to prune
    std::error_code ec;
    if (++kept > keep)
      fs::remove(other, ec);  // a leftover old checkpoint is harmless
    else
      kept_steps.push_back(other_step);
  }
  prune_shards(dir, run_id, kept_steps);
  // Temporary files of checkpoints are strays of writes that crashed before their rename (this
  // one's was renamed): never read, and removed here so that they do not pile up.
  std::error_code ec;
  for (const fs::directory_entry& e : fs::directory_iterator(dir, ec)) {
    const std::string name = e.path().filename().string();
    if (name.starts_with(".checkpoint-") && name.find(".safetensors.tmp.") != std::string::npos)
      fs::remove(e.path(), ec);
  }
  return path;
}

Checkpoint read_checkpoint(const std::string& path) {
  Checkpoint c;
  c.path = path;
  c.file = read_safetensors(path, MemoryTag::workspace);
  MIXP_CHECK(metadata_value(c.file, path, "format") == kFormat, path,
             ": not a mixp checkpoint (format '", c.file.metadata.at("format"), "')");
  c.version = parse_version(path, metadata_value(c.file, path, "version"));
  const std::string step = metadata_value(c.file, path, "step");
  try {
    c.step = std::stoll(step);
  } catch (const std::exception&) {
    MIXP_CHECK(false, path, ": step '", step, "' is not a number");
  }
  if (c.version == 1) return c;
  c.run_id = metadata_value(c.file, path, "run_id");
  const std::string state_text = metadata_value(c.file, path, "state");
  verify_checksums(c, state_text);
  const nlohmann::json values = nlohmann::json::parse(state_text, nullptr, false);
  MIXP_CHECK(values.is_object(), path, ": the saved state values are not readable");
  for (const auto& [k, v] : values.items()) {
    MIXP_CHECK(v.is_string(), path, ": saved value '", k, "' is not text");
    c.state.values[k] = v.get<std::string>();
  }
  c.state.tensors = c.file.tensors;
  return c;
}

std::vector<Checkpoint> read_checkpoint_shards(const Checkpoint& c) {
  std::vector<Checkpoint> shards;
  const auto it = c.file.metadata.find("shards");
  if (it == c.file.metadata.end()) return shards;
  const nlohmann::json manifest = nlohmann::json::parse(it->second, nullptr, false);
  MIXP_CHECK(manifest.is_array() && !manifest.empty(), c.path, ": its list of shards is not readable");
  const int ranks = int(manifest.size());
  for (int r = 0; r < ranks; ++r) {
    const nlohmann::json& entry = manifest[size_t(r)];
    MIXP_CHECK(entry.is_object() && entry.contains("file") && entry["file"].is_string() &&
                   entry.contains("crc32") && entry["crc32"].is_number_unsigned(),
               c.path, ": entry ", r, " of its list of shards is not readable");
    const std::string name = entry["file"].get<std::string>();
    MIXP_CHECK(name == checkpoint_shard_file_name(c.step, r, ranks), c.path, ": shard ", r,
               " is named '", name, "', not ", checkpoint_shard_file_name(c.step, r, ranks));
    const std::string path = (std::filesystem::path(c.path).parent_path() / name).string();
    MIXP_CHECK(std::filesystem::exists(path), c.path, ": its shard ", name, " (rank ", r, " of ",
               ranks, ") is missing");
    MIXP_CHECK(crc32_of_file(path) == entry["crc32"].get<uint32_t>(), c.path, ": its shard ",
               name, " does not match the checksum the checkpoint names (another write's shard?)");
    Checkpoint shard = read_checkpoint(path);
    MIXP_CHECK(shard.step == c.step && shard.run_id == c.run_id &&
                   metadata_value(shard.file, path, "shard") ==
                       std::to_string(r) + "/" + std::to_string(ranks),
               c.path, ": its shard ", name, " is of another step, run or rank");
    shards.push_back(std::move(shard));
  }
  return shards;
}

std::optional<Checkpoint> read_newest_checkpoint(
    const std::string& dir, const std::string& run_id,
    const std::function<void(const Checkpoint&)>& validate,
    const std::function<void(const std::string&)>& skipped) {
  for (const auto& [step, path] : list_checkpoints(dir)) {
    // A header that does not read is reported by read_checkpoint() below, with its reason.
    const std::optional<std::string> id = checkpoint_run_id(path);
    if (!run_id.empty() && id && *id != run_id) {
      if (skipped) skipped("skipping " + path + ": it belongs to another run");
      continue;
    }
    try {
      Checkpoint c = read_checkpoint(path);
      MIXP_CHECK(c.step == step, path, ": written after step ", c.step, ", not ", step,
                 " as its name says");
      if (validate) validate(c);
      return c;
    } catch (const Error& e) {
      std::string why = e.message();
      if (why.starts_with(path + ": ")) why.erase(0, path.size() + 2);
      if (skipped) skipped("skipping " + path + ": " + why);
    }
  }
  return std::nullopt;
}

}  // namespace mixp::io
