// Reading the reference conversion vectors of tests/data/vectors (their README gives the
// format), and judging an output against an expected pattern under the file's NaN rule.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "mixp/format.h"

namespace mixp::test {

struct VectorLine {
  uint32_t in = 0;
  uint32_t expected = 0;
  std::string tag;
};

struct VectorFile {
  std::string path;
  std::string op;       // e.g. "f32_to_e4m3_sat"
  std::string in_name;  // "fp32", "fp16", "bf16", "e4m3", "e5m2"
  std::string out_name;
  std::string nan_rule;  // "any" or "quiet"
  std::vector<VectorLine> lines;
};

/// The directory of the vectors, set by the build.
std::string vectors_dir();
/// Every conversion vector file, by name ("f32_to_f16.txt", ...).
std::vector<std::string> vector_file_names();
/// Parses a vector file; fails the calling test (and returns what it could) on a bad file.
VectorFile read_vectors(const std::string& name);

/// The format named in a vector header ("fp32", "fp16", "bf16", "e4m3", "e5m2").
Format vector_format(const std::string& header_name);

/// True when `got` is the expected output: bit for bit, or when `expected` is a NaN, any NaN
/// of `format` ("any") or any quiet one ("quiet": top mantissa bit set).
bool output_matches(const Format& format, const std::string& nan_rule, uint32_t expected,
                    uint32_t got);

}  // namespace mixp::test
