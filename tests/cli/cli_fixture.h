// The mixp command line as a test runs it: a scratch folder, `mixp ARGS` in the foreground or
// the background, and what the runs leave.
#pragma once

#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>
#include <string>
#include <vector>

#include "mixp/io/safetensors.h"
#include "support/scratch.h"

namespace mixp::cli_test {

namespace fs = std::filesystem;

struct CliResult {
  int status = -1;
  std::string out, err;
};

class Cli : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = test::scratch_path("mixp_cli_test_");
    fs::create_directories(dir_);
  }
  void TearDown() override { fs::remove_all(dir_); }

  // Runs `mixp ARGS < input` in `cwd` (the test's own when empty), with input given as text.
  CliResult mixp(const std::string& args, const std::string& input = "", const fs::path& cwd = {}) {
    return run_cli("", args, input, cwd);
  }

  // mixp(ARGS) in `cwd` on the fast kernels even in a suite run under MIXP_REFERENCE=1: for the
  // runs a test compares bit for bit with a spawn()ed one, which always runs them, or with bits
  // stored from the fast kernels.
  CliResult mixp_fast(const std::string& args, const fs::path& cwd = {}) {
    return run_cli("env -u MIXP_REFERENCE ", args, "", cwd);
  }

  CliResult run_cli(const std::string& prefix, const std::string& args,
                    const std::string& input = "", const fs::path& cwd = {}) {
    const fs::path in = dir_ / "stdin", out = dir_ / "stdout", err = dir_ / "stderr";
    std::ofstream(in, std::ios::binary) << input;
    std::string command = prefix + "'" + MIXP_CLI_PATH + "' " + args + " < '" + in.string() +
                          "' > '" + out.string() + "' 2> '" + err.string() + "'";
    if (!cwd.empty()) command = "cd '" + cwd.string() + "' && " + command;
    const int raw = std::system(command.c_str());
    CliResult r;
    r.status = WIFEXITED(raw) ? WEXITSTATUS(raw) : -1;
    r.out = test::slurp(out);
    r.err = test::slurp(err);
    return r;
  }

  // Starts `mixp ARGS` in the background, output to bg.out and bg.err in dir_.
  pid_t spawn(const std::string& args) {
    // The background runs are signalled mid-run: they test processes, not arithmetic, and run
    // the fast kernels even in a suite run under MIXP_REFERENCE=1, whose reference kernels
    // would outlast the tests' waits.
    const std::string command = std::string("exec env -u MIXP_REFERENCE '") + MIXP_CLI_PATH +
                                "' " + args + " > '" +
                                (dir_ / "bg.out").string() + "' 2> '" + (dir_ / "bg.err").string() +
                                "'";
    const pid_t pid = ::fork();
    if (pid == 0) {
      ::execl("/bin/sh", "sh", "-c", command.c_str(), static_cast<char*>(nullptr));
      ::_exit(127);
    }
    return pid;
  }

  // Every tensor of a safetensors file, as its own encoding: equal maps are bitwise equal.
  static std::map<std::string, std::vector<uint8_t>> tensors(const fs::path& file) {
    std::map<std::string, std::vector<uint8_t>> out;
    for (const auto& [name, t] : io::read_safetensors(file.string()).tensors)
      out[name] = io::encode_safetensors({{name, t}});
    return out;
  }

  fs::path dir_;
};

inline double json_number(const std::string& json, const std::string& key) {
  const std::string quoted = "\"" + key + "\": ";
  const size_t at = json.rfind(quoted);
  if (at == std::string::npos) return NAN;
  return std::strtod(json.c_str() + at + quoted.size(), nullptr);
}

// A small corpus with structure to learn: rotating words.
inline std::string repeated_text(size_t bytes) {
  const char* words[] = {"in ", "the ", "beginning ", "was ", "a ", "word ", "and ", "light. "};
  std::string s;
  for (size_t i = 0; s.size() < bytes; ++i) s += words[(i * 3 + i / 8) % 8];
  return s;
}

}  // namespace mixp::cli_test
