// The run folder: one run, under a lock.
#include "train/run_folder.h"

#include <fcntl.h>
#include <sys/file.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <random>
#include <sstream>

#include "mixp/error.h"
#include "mixp/io/checkpoint.h"

namespace mixp::train {
namespace {

namespace fs = std::filesystem;

constexpr const char* kLockFile = ".lock";
constexpr const char* kRunFiles[] = {"run.json", "metrics.jsonl", "summary.json",
                                     "model.safetensors", "loss.svg"};

bool is_run_file(const std::string& name) {
  if (std::find(std::begin(kRunFiles), std::end(kRunFiles), name) != std::end(kRunFiles))
    return true;
  return name.starts_with("checkpoint-") && name.ends_with(".safetensors");
}

std::string read_owner(int fd) {
  char buf[32] = {};
  const ssize_t n = ::pread(fd, buf, sizeof buf - 1, 0);
  std::string pid = n > 0 ? std::string(buf, size_t(n)) : "";
  while (!pid.empty() && (pid.back() == '\n' || pid.back() == ' ')) pid.pop_back();
  return pid.empty() ? "another process" : "process " + pid;
}

}  // namespace

std::vector<std::string> run_files(const std::string& dir) {
  std::vector<std::string> found;
  std::error_code ec;
  for (const fs::directory_entry& e : fs::directory_iterator(dir, ec)) {
    const std::string name = e.path().filename().string();
    if (is_run_file(name)) found.push_back(name);
  }
  std::sort(found.begin(), found.end());
  return found;
}

std::string new_run_id() {
  std::random_device entropy;
  const uint64_t now = uint64_t(std::chrono::system_clock::now().time_since_epoch().count());
  const uint64_t id =
      (uint64_t(entropy()) << 32 ^ uint64_t(entropy())) ^ now ^ (uint64_t(::getpid()) << 48);
  char buf[20];
  std::snprintf(buf, sizeof buf, "%016llx", (unsigned long long)id);
  return buf;
}

std::string folder_run_id(const std::string& dir) {
  std::ifstream in(fs::path(dir) / "run.json");
  if (!in) return "";
  const nlohmann::json j = nlohmann::json::parse(in, nullptr, /*allow_exceptions=*/false);
  return j.is_object() && j.contains("run_id") && j["run_id"].is_string()
             ? j["run_id"].get<std::string>()
             : "";
}

RunFolder::RunFolder(const std::string& dir, bool resume, bool overwrite) {
  std::error_code ec;
  fs::create_directories(dir, ec);
  MIXP_CHECK(!ec && fs::is_directory(dir), "cannot create the run folder ", dir, ": ",
             ec ? ec.message() : "a file of that name is in the way");
  const std::string lock_path = (fs::path(dir) / kLockFile).string();
  lock_fd_ = ::open(lock_path.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0644);
  MIXP_CHECK(lock_fd_ >= 0, "cannot open ", lock_path, ": ", std::strerror(errno));
  if (::flock(lock_fd_, LOCK_EX | LOCK_NB) != 0) {
    const std::string owner = read_owner(lock_fd_);
    ::close(lock_fd_);
    lock_fd_ = -1;
    MIXP_CHECK(false, "the run folder ", dir, " is in use by ", owner,
               "; wait for it to finish, or choose another --out");
  }
  const std::string pid = std::to_string(::getpid()) + "\n";
  if (::ftruncate(lock_fd_, 0) != 0 || ::pwrite(lock_fd_, pid.data(), pid.size(), 0) < 0) {
    // The lock holds without the process id; only the message of a second process loses it.
  }
  if (resume) return;
  const std::vector<std::string> files = run_files(dir);
  if (files.empty()) return;
  if (!overwrite) {
    std::ostringstream names;
    for (size_t i = 0; i < files.size(); ++i) names << (i ? ", " : "") << files[i];
    ::close(lock_fd_);
    lock_fd_ = -1;
    MIXP_CHECK(false, "the run folder ", dir, " holds another run's files (", names.str(),
               "); continue that run with --resume ", dir,
               ", choose another --out, or give --overwrite to delete them");
  }
  for (const std::string& name : files) fs::remove(fs::path(dir) / name, ec);
}

RunFolder::~RunFolder() {
  if (lock_fd_ >= 0) ::close(lock_fd_);  // closing releases the flock
}

}  // namespace mixp::train
