// Naming, listing, writing and pruning the checkpoints of a run folder.
#include "mixp/io/checkpoint.h"

#include <algorithm>
#include <cstdio>
#include <filesystem>

#include "mixp/error.h"

namespace mixp::io {
namespace {

constexpr std::string_view kPrefix = "checkpoint-", kSuffix = ".safetensors";

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

std::string write_checkpoint(const std::string& dir, int64_t step,
                             const std::vector<std::pair<std::string, Tensor>>& tensors,
                             const std::map<std::string, std::string>& metadata, int keep) {
  namespace fs = std::filesystem;
  MIXP_CHECK(keep >= 1, "checkpoint: keep must be >= 1, got ", keep);
  fs::create_directories(dir);
  const std::string path = (fs::path(dir) / checkpoint_file_name(step)).string();
  write_safetensors(path, tensors, metadata);  // durable once this returns
  const auto all = list_checkpoints(dir);
  for (size_t i = size_t(keep); i < all.size(); ++i) {
    std::error_code ec;
    fs::remove(all[i].second, ec);  // a leftover old checkpoint is harmless
  }
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

std::optional<Checkpoint> read_newest_checkpoint(
    const std::string& dir, const std::function<void(const Checkpoint&)>& validate,
    const std::function<void(const std::string&)>& skipped) {
  for (const auto& [step, path] : list_checkpoints(dir)) {
    try {
      Checkpoint c{step, path, read_safetensors(path)};
      if (validate) validate(c);
      return c;
    } catch (const Error& e) {
      if (skipped) skipped("skipping checkpoint " + path + ": " + e.what());
    }
  }
  return std::nullopt;
}

}  // namespace mixp::io
