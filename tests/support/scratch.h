// Helpers of the tests that run whole trainings or commands: a per-test scratch folder and
// reading back what they wrote.
#pragma once

#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>

namespace mixp::test {

/// A folder under the system's temporary directory named by `prefix`, the process and the
/// running test, so that tests run in parallel by ctest never share one. Not created.
inline std::filesystem::path scratch_path(const std::string& prefix) {
  return std::filesystem::temp_directory_path() /
         (prefix + std::to_string(::getpid()) + "_" +
          ::testing::UnitTest::GetInstance()->current_test_info()->name());
}

/// The whole file, as bytes in a string.
inline std::string slurp(const std::filesystem::path& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

}  // namespace mixp::test
