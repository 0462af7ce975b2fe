#include "support/vectors.h"

#include <gtest/gtest.h>

#include <cmath>
#include <fstream>
#include <sstream>

namespace mixp::test {

std::string vectors_dir() { return MIXP_TEST_DATA_DIR "/vectors"; }

std::vector<std::string> vector_file_names() {
  return {"f32_to_f16.txt",        "f32_to_bf16.txt",     "f32_to_e4m3_sat.txt",
          "f32_to_e4m3_nosat.txt", "f32_to_e5m2_sat.txt", "f32_to_e5m2_nosat.txt",
          "f16_to_f32.txt",        "bf16_to_f32.txt",     "e4m3_to_f32.txt",
          "e5m2_to_f32.txt"};
}

VectorFile read_vectors(const std::string& name) {
  VectorFile file;
  file.path = vectors_dir() + "/" + name;
  std::ifstream in(file.path);
  EXPECT_TRUE(in.good()) << "cannot open " << file.path;
  std::string line;
  size_t declared_lines = 0;
  while (std::getline(in, line)) {
    if (line.empty()) continue;
    if (line[0] == '#') {
      const size_t colon = line.find(':');
      if (colon == std::string::npos) continue;
      const std::string key = line.substr(2, colon - 2);
      const std::string value = line.substr(colon + 2);
      if (key == "op") file.op = value;
      if (key == "in") file.in_name = value;
      if (key == "out") file.out_name = value;
      if (key == "nan_rule") file.nan_rule = value;
      if (key == "lines") declared_lines = std::stoul(value);
      continue;
    }
    std::istringstream fields(line);
    std::string in_hex, out_hex;
    VectorLine v;
    fields >> in_hex >> out_hex >> v.tag;
    v.in = uint32_t(std::stoul(in_hex, nullptr, 16));
    v.expected = uint32_t(std::stoul(out_hex, nullptr, 16));
    file.lines.push_back(v);
  }
  EXPECT_EQ(file.lines.size(), declared_lines) << file.path;
  EXPECT_FALSE(file.op.empty() || file.in_name.empty() || file.out_name.empty() ||
               file.nan_rule.empty())
      << file.path << ": incomplete header";
  return file;
}

Format vector_format(const std::string& header_name) {
  if (header_name == "fp32") return Format::fp32();
  if (header_name == "fp16") return Format::fp16();
  return parse_format(header_name);
}

bool output_matches(const Format& format, const std::string& nan_rule, uint32_t expected,
                    uint32_t got) {
  const float expected_value = decode(format, expected);
  if (!std::isnan(expected_value)) return got == expected;
  if (format.total_bits() < 32 && (got >> format.total_bits()) != 0) return false;
  if (!std::isnan(decode(format, got))) return false;
  if (nan_rule == "quiet") {
    const uint32_t quiet_bit = 1u << (format.mantissa_bits - 1);
    return (got & quiet_bit) != 0;
  }
  return nan_rule == "any";
}

}  // namespace mixp::test
