// safetensors: bit-exact round trips of every dtype, and a clean error for every malformed header.
#include "mixp/io/safetensors.h"

#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cmath>
#include <cstdio>

#include <cstring>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>

#include "mixp/error.h"
#include "mixp/random.h"
#include "support/same_bits.h"

namespace mixp {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;

// A tensor of `shape` whose bytes are random words: every bit pattern, NaNs included.
Tensor random_bits(const Shape& shape, DType dtype, uint64_t seed) {
  std::vector<uint8_t> bytes(size_t(shape.numel()) * size_t(size_of(dtype)));
  Philox rng(PhiloxState{seed, 7, 0});
  for (uint8_t& b : bytes) b = uint8_t(rng.next_u32());
  return from_buffer(bytes.data(), shape, dtype);
}

using test::same_bits;

// A file of `header` (as given, unpadded) followed by `data_bytes` zero bytes.
std::vector<uint8_t> file_of(const std::string& header, size_t data_bytes,
                             std::optional<uint64_t> length = std::nullopt) {
  std::vector<uint8_t> out(8 + header.size() + data_bytes, 0);
  const uint64_t n = length.value_or(header.size());
  std::memcpy(out.data(), &n, 8);
  std::memcpy(out.data() + 8, header.data(), header.size());
  return out;
}

// The message of the mixp::Error that decoding `bytes` throws ("" when it does not throw).
std::string decode_error(const std::vector<uint8_t>& bytes) {
  try {
    io::decode_safetensors(bytes, "test.safetensors");
  } catch (const Error& e) {
    return e.message();
  }
  return "";
}

class Safetensors : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() /
           ("mixp_io_test_" + std::to_string(::getpid()) + "_" +
            ::testing::UnitTest::GetInstance()->current_test_info()->name());
    fs::create_directories(dir_);
  }
  void TearDown() override { fs::remove_all(dir_); }
  fs::path dir_;
};

TEST(SafetensorsDType, NamesRoundTripForEveryDType) {
  for (DType d : all_dtypes())
    EXPECT_EQ(io::parse_safetensors_dtype(io::safetensors_dtype_name(d)), d);
  EXPECT_STREQ(io::safetensors_dtype_name(DType::bf16), "BF16");
  EXPECT_STREQ(io::safetensors_dtype_name(DType::e4m3), "F8_E4M3");
  EXPECT_STREQ(io::safetensors_dtype_name(DType::e5m2), "F8_E5M2");
  EXPECT_THROW(io::parse_safetensors_dtype("F4"), Error);
}

TEST_F(Safetensors, EveryDTypeRoundTripsBitExactThroughAFile) {
  std::vector<std::pair<std::string, Tensor>> tensors;
  uint64_t seed = 1;
  for (DType d : all_dtypes()) {
    tensors.emplace_back(std::string("t.") + name_of(d), random_bits({3, 5}, d, seed++));
    tensors.emplace_back(std::string("odd.") + name_of(d), random_bits({7}, d, seed++));
  }
  tensors.emplace_back("scalar", random_bits(Shape{}, DType::f32, 99));
  tensors.emplace_back("empty", zeros({0, 4}, DType::bf16));
  const std::string path = (dir_ / "all.safetensors").string();
  io::write_safetensors(path, tensors, {{"format", "pt"}, {"note", "a \"quoted\" value"}});
  const io::SafetensorsFile file = io::read_safetensors(path);
  ASSERT_EQ(file.tensors.size(), tensors.size());
  for (const auto& [name, t] : tensors) {
    ASSERT_TRUE(file.tensors.count(name)) << name;
    EXPECT_TRUE(same_bits(file.tensors.at(name), t)) << name;
  }
  EXPECT_EQ(file.metadata.at("format"), "pt");
  EXPECT_EQ(file.metadata.at("note"), "a \"quoted\" value");
  // No temporary file is left behind.
  int entries = 0;
  for (const auto& e : fs::directory_iterator(dir_)) entries += e.is_regular_file();
  EXPECT_EQ(entries, 1);
}

TEST(SafetensorsFormat, HeaderIsSortedPaddedAndPacked) {
  const std::vector<uint8_t> bytes =
      io::encode_safetensors({{"zeta", random_bits({2}, DType::f32, 1)},
                              {"alpha", random_bits({3}, DType::f16, 2)},
                              {"mid", random_bits({1, 1}, DType::u8, 3)}},
                             {{"format", "pt"}});
  uint64_t n = 0;
  std::memcpy(&n, bytes.data(), 8);
  EXPECT_EQ(n % 8, 0u);
  const json header = json::parse(std::string(bytes.begin() + 8, bytes.begin() + 8 + long(n)));
  EXPECT_EQ(header["__metadata__"]["format"], "pt");
  EXPECT_EQ(header["alpha"]["dtype"], "F16");
  EXPECT_EQ(header["alpha"]["shape"], json::array({3}));
  // Sorted by name: alpha, mid, zeta, packed from offset 0.
  EXPECT_EQ(header["alpha"]["data_offsets"], json::array({0, 6}));
  EXPECT_EQ(header["mid"]["data_offsets"], json::array({6, 7}));
  EXPECT_EQ(header["zeta"]["data_offsets"], json::array({7, 15}));
  EXPECT_EQ(bytes.size(), 8 + n + 15);
}

TEST(SafetensorsFormat, WriterRejectsDuplicateAndReservedNames) {
  const Tensor t = zeros({2});
  EXPECT_THROW(io::encode_safetensors({{"a", t}, {"a", t}}), Error);
  EXPECT_THROW(io::encode_safetensors({{"__metadata__", t}}), Error);
  EXPECT_THROW(io::encode_safetensors({{"", t}}), Error);
}

struct Malformed {
  const char* what;
  std::vector<uint8_t> bytes;
  const char* expect;  // a part of the message
};

TEST(SafetensorsReader, EveryMalformedHeaderGivesANamedError) {
  const std::string ok = R"({"w":{"dtype":"F32","shape":[2],"data_offsets":[0,8]}})";
  ASSERT_EQ(decode_error(file_of(ok, 8)), "");
  const std::vector<Malformed> cases = {
      {"short file", {1, 2, 3}, "too short"},
      {"huge header length", file_of(ok, 8, uint64_t(1) << 40), "above the limit"},
      {"header past the end", file_of(ok, 8, ok.size() + 9), "past the end of the file"},
      {"not JSON", file_of(R"({"w": {"dtype": )", 0), "not valid JSON"},
      {"not an object", file_of("[1, 2, 3]", 0), "not a JSON object"},
      {"entry not an object", file_of(R"({"w": 3})", 0), "tensor 'w'"},
      {"unknown dtype", file_of(R"({"w":{"dtype":"F4","shape":[2],"data_offsets":[0,1]}})", 1),
       "unknown safetensors dtype 'F4'"},
      {"no dtype", file_of(R"({"w":{"shape":[2],"data_offsets":[0,8]}})", 8), "no dtype"},
      {"no shape", file_of(R"({"w":{"dtype":"F32","data_offsets":[0,8]}})", 8), "no shape"},
      {"bad offsets", file_of(R"({"w":{"dtype":"F32","shape":[2],"data_offsets":[0]}})", 8),
       "data_offsets"},
      {"negative size", file_of(R"({"w":{"dtype":"F32","shape":[-2],"data_offsets":[0,8]}})", 8),
       "non-negative"},
      {"size mismatch", file_of(R"({"w":{"dtype":"F32","shape":[3],"data_offsets":[0,8]}})", 8),
       "needs 12 bytes"},
      {"huge shape",
       file_of(R"({"w":{"dtype":"F64","shape":[4294967296,4294967296],"data_offsets":[0,8]}})", 8),
       "more than 2^64"},
      {"offsets reversed", file_of(R"({"w":{"dtype":"U8","shape":[0],"data_offsets":[8,0]}})", 8),
       "end before they begin"},
      {"out of bounds", file_of(R"({"w":{"dtype":"F32","shape":[2],"data_offsets":[4,12]}})", 8),
       "past the end of the data"},
      {"overlap",
       file_of(R"({"a":{"dtype":"F32","shape":[2],"data_offsets":[0,8]},)"
               R"("b":{"dtype":"F32","shape":[1],"data_offsets":[4,8]}})",
               8),
       "overlaps"},
      {"gap",
       file_of(R"({"a":{"dtype":"F32","shape":[1],"data_offsets":[0,4]},)"
               R"("b":{"dtype":"F32","shape":[1],"data_offsets":[8,12]}})",
               12),
       "gap of 4 bytes before tensor 'b'"},
      {"uncovered tail", file_of(ok, 12), "not covered"},
      {"duplicate name",
       file_of(R"({"w":{"dtype":"F32","shape":[1],"data_offsets":[0,4]},)"
               R"("w":{"dtype":"F32","shape":[1],"data_offsets":[4,8]}})",
               8),
       "'w' is named twice"},
      {"metadata not strings", file_of(R"({"__metadata__":{"a":1}})", 0), "not a string"},
      {"unknown field",
       file_of(R"({"w":{"dtype":"F32","shape":[2],"data_offsets":[0,8],"x":1}})", 8),
       "unknown field 'x'"},
      {"too many dims",
       file_of(R"({"w":{"dtype":"U8","shape":[1,1,1,1,1,1,1,1,1],"data_offsets":[0,1]}})", 1),
       "dimensions"},
  };
  for (const Malformed& c : cases) {
    const std::string message = decode_error(c.bytes);
    EXPECT_NE(message.find(c.expect), std::string::npos)
        << c.what << ": got '" << message << "', expected it to contain '" << c.expect << "'";
    EXPECT_NE(message.find("test.safetensors"), std::string::npos) << c.what << ": " << message;
  }
}

TEST_F(Safetensors, MissingFileIsAnError) {
  EXPECT_THROW(io::read_safetensors((dir_ / "absent.safetensors").string()), Error);
}

TEST_F(Safetensors, AtomicWriteReplacesAnExistingFile) {
  const std::string path = (dir_ / "f.txt").string();
  io::write_file_atomically(path, std::string_view("first"));
  io::write_file_atomically(path, std::string_view("second"));
  std::ifstream in(path);
  std::string text;
  std::getline(in, text);
  EXPECT_EQ(text, "second");
  EXPECT_THROW(
      io::write_file_atomically((dir_ / "no" / "such" / "dir.txt").string(), std::string_view("x")),
      Error);
}

}  // namespace
}  // namespace mixp

namespace mixp {
namespace {

// What `command` prints on stdout, and its exit status.
std::pair<std::string, int> run_command(const std::string& command) {
  std::FILE* pipe = ::popen(command.c_str(), "r");
  if (!pipe) return {"", -1};
  std::string out;
  char buf[4096];
  for (size_t n; (n = std::fread(buf, 1, sizeof buf, pipe)) > 0;) out.append(buf, n);
  const int status = ::pclose(pipe);
  return {out, WIFEXITED(status) ? WEXITSTATUS(status) : -1};
}

// An independent reader (tests/io/independent_safetensors_reader.py: Python's standard library
// and the format's description, no mixp code) finds standard dtype names, offsets that tile
// the data, and the values mixp decodes, on a file with every dtype and every kind of value.
TEST_F(Safetensors, AnIndependentReaderAgreesOnEveryDType) {
  if (!fs::exists("/usr/bin/python3")) GTEST_SKIP() << "/usr/bin/python3 is not installed";
  std::vector<std::pair<std::string, Tensor>> tensors;
  uint64_t seed = 11;
  for (DType d : all_dtypes())
    tensors.emplace_back(std::string("layer.") + name_of(d), random_bits({4, 8}, d, seed++));
  tensors.emplace_back("scalar", random_bits(Shape{}, DType::f64, 3));
  tensors.emplace_back("empty", zeros({0, 3}, DType::f16));
  const std::string path = (dir_ / "model.safetensors").string();
  io::write_safetensors(path, tensors, {{"format", "pt"}});
  const auto [out, status] =
      run_command("/usr/bin/python3 '" MIXP_INDEPENDENT_READER "' '" + path + "'");
  ASSERT_EQ(status, 0) << out;
  const json read = json::parse(out);
  EXPECT_EQ(read["metadata"]["format"], "pt");
  ASSERT_EQ(read["tensors"].size(), tensors.size());
  for (const auto& [name, t] : tensors) {
    SCOPED_TRACE(name);
    const json& r = read["tensors"].at(name);
    EXPECT_EQ(r["dtype"], io::safetensors_dtype_name(t.dtype()));
    const auto dims = t.shape().dims();
    EXPECT_EQ(r["shape"].get<std::vector<int64_t>>(),
              std::vector<int64_t>(dims.begin(), dims.end()));
    const std::vector<double> mine = t.to_vector();
    ASSERT_EQ(r["values"].size(), mine.size());
    for (size_t i = 0; i < mine.size(); ++i) {
      const json& v = r["values"][i];
      if (std::isfinite(mine[i])) {
        EXPECT_EQ(v.get<double>(), mine[i]) << "element " << i;
      } else {
        ASSERT_TRUE(v.is_string()) << "element " << i;
        const std::string want = std::isnan(mine[i]) ? "nan" : mine[i] > 0 ? "inf" : "-inf";
        EXPECT_EQ(v.get<std::string>(), want) << "element " << i;
      }
    }
  }
  // The reader is strict: a gap it must report.
  std::vector<uint8_t> bytes = io::encode_safetensors({{"a", zeros({2}, DType::f32)}});
  bytes.push_back(0);
  const std::string gap = (dir_ / "gap.safetensors").string();
  std::ofstream(gap, std::ios::binary)
      .write(reinterpret_cast<const char*>(bytes.data()), std::streamsize(bytes.size()));
  EXPECT_EQ(run_command("/usr/bin/python3 '" MIXP_INDEPENDENT_READER "' '" + gap + "' 2>/dev/null")
                .second,
            1);
}

}  // namespace
}  // namespace mixp
