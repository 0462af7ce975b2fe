// The corpus of malformed inputs: safetensors files, IDX files (plain and gzipped) and text,
// each made here from a valid file by one defect. Every one must give a mixp::Error that names
// the file and the problem (and the tensor, for a tensor's defect); none may crash, hang or
// leak (this suite runs under `make asan`). Byte flips and truncations at every position check
// that whatever a damaged file holds, the readers answer with a value or an Error.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <filesystem>
#include <functional>
#include <limits>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "data/idx_parse.h"
#include "dataset/files.h"
#include "mixp/data/dataset.h"
#include "mixp/error.h"
#include "mixp/io/safetensors.h"
#include "mixp/random.h"

namespace mixp {
namespace {

namespace fs = std::filesystem;
using data::test::idx_bytes;
using data::test::TempDir;
using data::test::write_file;
using data::test::write_gz;
using nlohmann::json;
using Bytes = std::vector<uint8_t>;

// The message of the mixp::Error `f` throws; a failure (and "") when it throws nothing or
// anything else.
std::string error_of(const std::function<void()>& f) {
  try {
    f();
  } catch (const Error& e) {
    return e.message();
  } catch (const std::exception& e) {
    ADD_FAILURE() << "not a mixp::Error: " << e.what();
    return {};
  }
  ADD_FAILURE() << "no error";
  return {};
}

#define EXPECT_CONTAINS(text, part) \
  EXPECT_NE(std::string(text).find(part), std::string::npos) << "in: " << (text)

// ---- safetensors ----------------------------------------------------------------------------

// A valid file with a tensor of every dtype, as mixp writes them.
std::vector<std::pair<std::string, Tensor>> every_dtype() {
  std::vector<std::pair<std::string, Tensor>> t;
  Philox rng(PhiloxState{7, 1, 0});
  for (int d = 0; d < kDTypeCount; ++d) {
    const DType dtype = DType(d);
    std::vector<double> v;
    for (int i = 0; i < 6; ++i) v.push_back(std::round(4.0 * double(rng.normal())));
    if (dtype == DType::u8)
      for (double& x : v) x = std::abs(x);
    t.emplace_back(std::string("t.") + name_of(dtype), from_values(v, {2, 3}, dtype));
  }
  return t;
}

// A file with the header `header` (padded as the writer pads) and `data`.
Bytes with_header(const std::string& header, const Bytes& data) {
  std::string text = header;
  text.append((8 - text.size() % 8) % 8, ' ');
  Bytes out;
  out.reserve(8 + text.size() + data.size());
  for (int i = 0; i < 8; ++i) out.push_back(uint8_t(uint64_t(text.size()) >> (8 * i)));
  out.insert(out.end(), text.begin(), text.end());
  out.insert(out.end(), data.begin(), data.end());
  return out;
}

// The header and data of a valid file, to edit.
struct Parts {
  json header;
  Bytes data;
};
Parts split(const Bytes& file) {
  uint64_t n = 0;
  std::memcpy(&n, file.data(), 8);
  const std::string text(file.begin() + 8, file.begin() + 8 + std::ptrdiff_t(n));
  return {json::parse(text), Bytes(file.begin() + 8 + std::ptrdiff_t(n), file.end())};
}

class CorruptSafetensors : public ::testing::Test {
 protected:
  void SetUp() override {
    valid_ = io::encode_safetensors(every_dtype(), {{"format", "pt"}});
    parts_ = split(valid_);
  }
  // Writes `bytes` to a file and returns the message of read_safetensors' error on it.
  std::string read_error(const Bytes& bytes, const std::string& name = "bad.safetensors") {
    const std::string path = (dir_ / name).string();
    write_file(path, bytes);
    const std::string message = error_of([&] { io::read_safetensors(path); });
    EXPECT_CONTAINS(message, path);
    return message;
  }
  // The error of the valid file with its header edited by `edit`.
  std::string header_error(const std::function<void(json&)>& edit, const Bytes* data = nullptr) {
    json h = parts_.header;
    edit(h);
    return read_error(with_header(h.dump(), data ? *data : parts_.data));
  }
  TempDir dir_;
  Bytes valid_;
  Parts parts_;
};

TEST_F(CorruptSafetensors, TheValidFileReadsBack) {
  const std::string path = (dir_ / "good.safetensors").string();
  write_file(path, valid_);
  const io::SafetensorsFile f = io::read_safetensors(path);
  EXPECT_EQ(f.tensors.size(), size_t(kDTypeCount));
  EXPECT_EQ(f.metadata.at("format"), "pt");
}

TEST_F(CorruptSafetensors, TruncatedAtEveryLength) {
  // Every prefix of the file is damaged: each must fail, naming the file. In memory, through
  // the parser read_safetensors uses (writing hundreds of files would only test the disk).
  const size_t header_end = 8 + parts_.header.dump().size();
  for (size_t n = 0; n < valid_.size(); ++n) {
    SCOPED_TRACE(n);
    const Bytes cut(valid_.begin(), valid_.begin() + std::ptrdiff_t(n));
    const std::string message = error_of([&] { io::decode_safetensors(cut, "cut.safetensors"); });
    EXPECT_CONTAINS(message, "cut.safetensors");
    if (n < 8) {
      EXPECT_CONTAINS(message, "too short");
    } else if (n < header_end) {
      EXPECT_CONTAINS(message, "runs past the end");
    }
  }
  EXPECT_CONTAINS(read_error({}), "0 bytes");
  EXPECT_CONTAINS(read_error(Bytes(valid_.begin(), valid_.end() - 1)), "run past the end");
}

TEST_F(CorruptSafetensors, HeaderLengthHugeBeyondTheFileOrTooSmall) {
  for (const uint64_t n :
       {std::numeric_limits<uint64_t>::max(), uint64_t(1) << 63, io::kMaxSafetensorsHeader + 1}) {
    Bytes b = valid_;
    std::memcpy(b.data(), &n, 8);
    const std::string message = read_error(b);
    EXPECT_CONTAINS(message, std::to_string(n));
    EXPECT_CONTAINS(message, "above the limit");
  }
  Bytes b = valid_;
  const uint64_t beyond = valid_.size() - 8 + 1;
  std::memcpy(b.data(), &beyond, 8);
  EXPECT_CONTAINS(read_error(b), "runs past the end of the file");
  for (const uint64_t tiny : {uint64_t(0), uint64_t(1)}) {
    std::memcpy(b.data(), &tiny, 8);
    EXPECT_CONTAINS(read_error(b), "too short for a JSON object");
  }
}

TEST_F(CorruptSafetensors, BadJson) {
  const std::vector<std::string> bad = {
      "{", "{\"a\":}", "nul", "{\"a\" 1}", "{}}", "{\"\xff\xfe\":1}", std::string("{\"a\":\0}", 7)};
  for (const std::string& text : bad) {
    SCOPED_TRACE(text);
    EXPECT_CONTAINS(read_error(with_header(text, {})), "not valid JSON");
  }
  // A number beyond a double makes the JSON library throw another exception type (found by
  // fuzz_safetensors); it must still be a mixp::Error.
  for (const std::string text : {"[111.055555555E5555559]", "{\"a\": 1e999}", "{\"a\": -1e400}"}) {
    SCOPED_TRACE(text);
    EXPECT_CONTAINS(read_error(with_header(text, {})), "not valid JSON");
  }
  for (const std::string text : {"[1, 2]", "\"text\"", "42", "null"})
    EXPECT_CONTAINS(read_error(with_header(text, {})), "not a JSON object");
  EXPECT_CONTAINS(read_error(with_header("{\"__metadata__\": [1]}", {})), "__metadata__");
  EXPECT_CONTAINS(read_error(with_header("{\"__metadata__\": {\"k\": 1}}", {})), "'k'");
}

TEST_F(CorruptSafetensors, UnknownOrMissingFields) {
  std::string m = header_error([](json& h) { h["t.f32"]["dtype"] = "F128"; });
  EXPECT_CONTAINS(m, "tensor 't.f32'");
  EXPECT_CONTAINS(m, "unknown safetensors dtype 'F128'");
  EXPECT_CONTAINS(header_error([](json& h) { h["t.f32"]["dtype"] = "f32"; }), "'f32'");
  EXPECT_CONTAINS(header_error([](json& h) { h["t.f32"]["dtype"] = 4; }), "no dtype string");
  EXPECT_CONTAINS(header_error([](json& h) { h["t.i64"].erase("shape"); }), "no shape array");
  EXPECT_CONTAINS(header_error([](json& h) {
                    h["t.i64"]["data_offsets"] = {0, 8, 16};
                  }),
                  "array of two offsets");
  m = header_error([](json& h) { h["t.u8"]["extra"] = 1; });
  EXPECT_CONTAINS(m, "tensor 't.u8'");
  EXPECT_CONTAINS(m, "unknown field 'extra'");
  EXPECT_CONTAINS(header_error([](json& h) { h["t.u8"] = 3; }), "not a JSON object");
  EXPECT_CONTAINS(header_error([](json& h) {
                    h["t.bf16"]["shape"] = {2, -3};
                  }),
                  "not a non-negative integer");
  EXPECT_CONTAINS(header_error([](json& h) {
                    h["t.bf16"]["shape"] = {2, 1.5};
                  }),
                  "not a non-negative integer");
  EXPECT_CONTAINS(header_error([](json& h) {
                    h["t.bf16"]["shape"] = json::array({1, 1, 1, 1, 1, 1, 1, 1, 1});
                  }),
                  "9 dimensions");
  EXPECT_CONTAINS(header_error([](json& h) {
                    h["t.f64"]["data_offsets"] = {-8, 40};
                  }),
                  "not non-negative integers");
}

TEST_F(CorruptSafetensors, ShapeTimesDtypeSizeIsNotTheSpan) {
  std::string m = header_error([](json& h) { h["t.f16"]["shape"] = {2, 4}; });
  EXPECT_CONTAINS(m, "tensor 't.f16'");
  EXPECT_CONTAINS(m, "needs 16 bytes");
  EXPECT_CONTAINS(m, "span 12");
  m = header_error([](json& h) { h["t.f16"]["dtype"] = "F32"; });  // same shape, wider dtype
  EXPECT_CONTAINS(m, "needs 24 bytes");
  // Sizes whose product overflows 64 bits.
  m = header_error([](json& h) { h["t.f16"]["shape"] = {uint64_t(1) << 40, uint64_t(1) << 40}; });
  EXPECT_CONTAINS(m, "more than 2^64");
}

TEST_F(CorruptSafetensors, OverlappingReversedOutOfBoundsAndGapOffsets) {
  const uint64_t a0 = parts_.header["t.e4m3"]["data_offsets"][0].get<uint64_t>();
  const uint64_t b0 = parts_.header["t.e5m2"]["data_offsets"][0].get<uint64_t>();
  ASSERT_EQ(b0, a0 + 6);  // sorted by name, packed: t.e4m3 then t.e5m2
  // t.e5m2 moved onto t.e4m3's bytes: both overlap and the data after it has no owner.
  std::string m = header_error([&](json& h) { h["t.e5m2"]["data_offsets"] = {a0 + 3, a0 + 9}; });
  EXPECT_CONTAINS(m, "overlaps tensor");
  EXPECT_CONTAINS(m, "t.e5m2");
  m = header_error([&](json& h) { h["t.e5m2"]["data_offsets"] = {b0 + 6, b0}; });
  EXPECT_CONTAINS(m, "tensor 't.e5m2'");
  EXPECT_CONTAINS(m, "end before they begin");
  const uint64_t size = parts_.data.size();
  m = header_error([&](json& h) { h["t.e5m2"]["data_offsets"] = {size, size + 6}; });
  EXPECT_CONTAINS(m, "run past the end of the data");
  // One byte more data, placed before the last tensor: a gap.
  Bytes longer = parts_.data;
  longer.push_back(0);
  m = header_error(
      [&](json& h) {
        for (auto& [name, e] : h.items())  // the tensor that ends the data moves up a byte
          if (name != "__metadata__" && e["data_offsets"][1].get<uint64_t>() == size)
            e["data_offsets"] = {e["data_offsets"][0].get<uint64_t>() + 1, size + 1};
      },
      &longer);
  EXPECT_CONTAINS(m, "a gap of 1 bytes");
  // Data no tensor covers.
  m = header_error([](json&) {}, &longer);
  EXPECT_CONTAINS(m, "1 bytes of data after the last tensor");
}

TEST_F(CorruptSafetensors, DuplicateNames) {
  // JSON libraries keep the last of two keys; the reader must refuse them instead.
  std::string text = parts_.header.dump();
  const std::string entry = "\"t.u8\":" + parts_.header["t.u8"].dump();
  text.insert(1, entry + ",");
  const std::string m = read_error(with_header(text, parts_.data));
  EXPECT_CONTAINS(m, "tensor 't.u8' is named twice");
}

TEST_F(CorruptSafetensors, EveryByteFlipOfTheHeaderIsAValueOrAnError) {
  // A flipped bit anywhere in the length or the JSON: the reader must return or throw
  // mixp::Error, nothing else. Some flips keep a valid file (a space, a digit of a shape that
  // stays consistent is impossible, but metadata text can change).
  uint64_t n = 0;
  std::memcpy(&n, valid_.data(), 8);
  int errors = 0, parsed = 0;
  for (size_t i = 0; i < 8 + n; ++i) {
    for (const uint8_t mask : {uint8_t(0x01), uint8_t(0x20), uint8_t(0x80)}) {
      Bytes b = valid_;
      b[i] ^= mask;
      try {
        io::decode_safetensors(b, "flipped");
        ++parsed;
      } catch (const Error& e) {
        EXPECT_CONTAINS(e.message(), "flipped");
        ++errors;
      }
    }
  }
  EXPECT_EQ(errors + parsed, int(3 * (8 + n)));
  EXPECT_GT(errors, parsed);
}

TEST_F(CorruptSafetensors, NonFiniteWeightsAreFoundByTensorAndElement) {
  std::vector<std::pair<std::string, Tensor>> t = every_dtype();
  EXPECT_FALSE(io::find_nonfinite(io::decode_safetensors(valid_, "valid")));
  for (const DType dtype : {DType::f32, DType::f64, DType::f16, DType::bf16, DType::e5m2}) {
    for (const double bad : {std::nan(""), -std::numeric_limits<double>::infinity()}) {
      SCOPED_TRACE(name_of(dtype));
      std::vector<double> v(6, 1.0);
      v[4] = bad;
      auto edited = t;
      for (auto& [name, x] : edited) {
        if (x.dtype() != dtype) continue;
        x = from_values(v, {2, 3}, dtype);
        // from_values saturates to E5M2's largest finite value; -inf is the code 0xFC.
        if (dtype == DType::e5m2 && std::isinf(bad)) static_cast<uint8_t*>(x.raw_data())[4] = 0xFC;
      }
      const io::SafetensorsFile f =
          io::decode_safetensors(io::encode_safetensors(edited), "nan.safetensors");
      const auto found = io::find_nonfinite(f);
      ASSERT_TRUE(found);
      EXPECT_EQ(found->tensor, std::string("t.") + name_of(dtype));
      EXPECT_EQ(found->element, 4);
      EXPECT_EQ(std::isnan(found->value), std::isnan(bad));
      const std::string m = error_of([&] { io::check_finite(f, "nan.safetensors"); });
      EXPECT_CONTAINS(m, "nan.safetensors");
      EXPECT_CONTAINS(m, found->tensor);
      EXPECT_CONTAINS(m, "element 4");
    }
  }
  // E4M3 has no infinity; its NaN is S.1111.111.
  std::vector<double> v(6, 0.5);
  v[0] = std::nan("");
  const io::SafetensorsFile f = io::decode_safetensors(
      io::encode_safetensors({{"w", from_values(v, {6}, DType::e4m3)}}), "e4m3");
  ASSERT_TRUE(io::find_nonfinite(f));
  EXPECT_EQ(io::find_nonfinite(f)->element, 0);
}

// ---- IDX --------------------------------------------------------------------------------------

Bytes label_file() { return idx_bytes(0x801, {10}, {0, 1, 2, 3, 4, 5, 6, 7, 8, 9}); }
Bytes image_file(uint32_t n = 10) {
  Bytes pixels(size_t(n) * 4 * 3);
  for (size_t i = 0; i < pixels.size(); ++i) pixels[i] = uint8_t(i * 37);
  return idx_bytes(0x803, {n, 4, 3}, pixels);
}
Bytes gzip_of(const TempDir& dir, const Bytes& plain) {
  const fs::path p = dir / "tmp.gz";
  write_gz(p, plain);
  std::ifstream in(p, std::ios::binary);
  return Bytes((std::istreambuf_iterator<char>(in)), {});
}

class CorruptIdx : public ::testing::Test {
 protected:
  std::string read_error(const Bytes& bytes, const std::string& name) {
    const std::string path = (dir_ / name).string();
    write_file(path, bytes);
    const std::string message = error_of([&] { data::read_idx(path); });
    EXPECT_CONTAINS(message, path);
    return message;
  }
  TempDir dir_;
};

// read_idx's steps on bytes in memory, as it runs them on a file named `source`.
std::string idx_error(const Bytes& bytes, const std::string& source) {
  const bool gz = source.ends_with(".gz");
  const std::string m = error_of([&] {
    data::detail::parse_idx(gz ? data::detail::gunzip(bytes, source) : bytes, source, 0, gz);
  });
  EXPECT_CONTAINS(m, source);
  return m;
}

TEST_F(CorruptIdx, TruncatedAtEveryLengthPlainAndGzipped) {
  for (const Bytes& valid : {label_file(), image_file()}) {
    const Bytes gz = gzip_of(dir_, valid);
    for (size_t n = 0; n < valid.size(); ++n) {
      SCOPED_TRACE(n);
      const Bytes cut(valid.begin(), valid.begin() + std::ptrdiff_t(n));
      EXPECT_CONTAINS(idx_error(cut, "cut"), "truncated");
      // The same bytes gzipped whole: a short IDX inside a good gzip stream.
      if (n % 7 == 0) {
        EXPECT_CONTAINS(idx_error(gzip_of(dir_, cut), "inside.gz"), "decompressed bytes");
      }
    }
    for (size_t n = 0; n < gz.size(); ++n) {
      SCOPED_TRACE(n);
      EXPECT_CONTAINS(idx_error(Bytes(gz.begin(), gz.begin() + std::ptrdiff_t(n)), "c.gz"), "gzip");
    }
    // And through the files.
    EXPECT_CONTAINS(read_error(Bytes(valid.begin(), valid.end() - 1), "short"), "truncated");
    EXPECT_CONTAINS(read_error(Bytes(gz.begin(), gz.end() - 1), "short.gz"), "gzip");
  }
}

TEST_F(CorruptIdx, WrongMagicNumbers) {
  Bytes b = label_file();
  b[0] = 0x1f;
  EXPECT_CONTAINS(read_error(b, "m1"), "wrong magic number");
  b = label_file();
  b[2] = 0x0D;  // float data
  EXPECT_CONTAINS(read_error(b, "m2"), "only unsigned byte");
  b = label_file();
  b[3] = 0;
  EXPECT_CONTAINS(read_error(b, "m3"), "0 dimensions");
  b[3] = 9;
  EXPECT_CONTAINS(read_error(b, "m4"), "9 dimensions");
  // A labels file where images belong, and the other way around.
  TempDir set;
  write_file(set / "train-images-idx3-ubyte", label_file());
  write_file(set / "train-labels-idx1-ubyte", label_file());
  write_file(set / "t10k-images-idx3-ubyte", image_file());
  write_file(set / "t10k-labels-idx1-ubyte", image_file());
  const std::string m = error_of([&] { data::load_idx_classification(set.path().string()); });
  EXPECT_CONTAINS(m, "train-images-idx3-ubyte");
  EXPECT_CONTAINS(m, "expected 0x00000803");
}

TEST_F(CorruptIdx, DimensionsThatDoNotMatchTheSize) {
  Bytes b = image_file();
  b[7] = 11;  // 11 images declared, 10 present
  std::string m = read_error(b, "d1");
  EXPECT_CONTAINS(m, "truncated: expected 148 bytes for dimensions [11, 4, 3], found 136");
  b = image_file();
  b[7] = 9;
  m = read_error(b, "d2");
  EXPECT_CONTAINS(m, "12 unexpected bytes after the data");
  // Dimensions whose product is beyond any memory.
  b = idx_bytes(0x804, {0xFFFFFFFF, 0xFFFFFFFF, 0xFFFFFFFF, 0xFFFFFFFF}, {1, 2, 3});
  EXPECT_CONTAINS(read_error(b, "d3"), "too large");
  b = idx_bytes(0x803, {0xFFFF, 0xFFFF, 2}, {1, 2, 3});
  EXPECT_CONTAINS(read_error(b, "d4"), "truncated: expected 8589672466 bytes");
}

TEST_F(CorruptIdx, DamagedGzipStreams) {
  const Bytes gz = gzip_of(dir_, image_file());
  EXPECT_CONTAINS(read_error(image_file(), "plain-named.gz"), "not gzip data");
  EXPECT_CONTAINS(read_error({}, "empty.gz"), "not gzip data");
  Bytes b = gz;
  b[b.size() - 6] ^= 0xFF;  // the CRC-32 of the trailer
  EXPECT_CONTAINS(read_error(b, "crc.gz"), "corrupt or truncated gzip data");
  b = gz;
  b.push_back(0x42);  // garbage after the member
  EXPECT_CONTAINS(read_error(b, "trailing.gz"), "corrupt or truncated gzip data");
  // Two members, as `cat a.gz b.gz` makes, are one stream.
  const Bytes labels = label_file();
  Bytes two = gzip_of(dir_, Bytes(labels.begin(), labels.begin() + 9));
  const Bytes rest = gzip_of(dir_, Bytes(labels.begin() + 9, labels.end()));
  two.insert(two.end(), rest.begin(), rest.end());
  write_file(dir_ / "two.gz", two);
  EXPECT_EQ(data::read_idx((dir_ / "two.gz").string()).data.size(), 10u);
  // Every byte of the compressed stream flipped: an array or an Error, nothing else.
  int errors = 0;
  for (size_t i = 0; i < gz.size(); ++i) {
    Bytes f = gz;
    f[i] ^= 0x55;
    try {
      data::detail::parse_idx(data::detail::gunzip(f, "flip.gz"), "flip.gz", 0, true);
    } catch (const Error& e) {
      EXPECT_CONTAINS(e.message(), "flip.gz");
      ++errors;
    }
  }
  EXPECT_GT(errors, int(gz.size()) / 2);
}

TEST_F(CorruptIdx, DataSetsThatDisagree) {
  TempDir set;
  auto write_set = [&](const Bytes& train_images, const Bytes& train_labels) {
    write_gz(set / "train-images-idx3-ubyte.gz", train_images);
    write_gz(set / "train-labels-idx1-ubyte.gz", train_labels);
    write_file(set / "t10k-images-idx3-ubyte", image_file());
    write_file(set / "t10k-labels-idx1-ubyte", label_file());
    return error_of([&] { data::load_idx_classification(set.path().string()); });
  };
  std::string m = write_set(image_file(9), label_file());
  EXPECT_CONTAINS(m, "9 images");
  EXPECT_CONTAINS(m, "10 labels");
  Bytes labels = label_file();
  labels.back() = 200;
  m = write_set(image_file(), labels);
  EXPECT_CONTAINS(m, "train-labels-idx1-ubyte.gz");
  EXPECT_CONTAINS(m, "label 200 of sample 9");
  m = write_set(idx_bytes(0x803, {0, 4, 3}, {}), idx_bytes(0x801, {0}, {}));
  EXPECT_CONTAINS(m, "no images");
  m = write_set(idx_bytes(0x803, {10, 0, 3}, {}), label_file());
  EXPECT_CONTAINS(m, "no images");
}

// ---- text -------------------------------------------------------------------------------------

TEST(CorruptText, EmptyDirectoryOrTooShort) {
  TempDir dir;
  write_file(dir / "empty.txt", {});
  std::string m = error_of([&] { data::load_char_text((dir / "empty.txt").string()); });
  EXPECT_CONTAINS(m, "empty.txt");
  EXPECT_CONTAINS(m, "empty");
  m = error_of([&] { data::load_char_text(dir.path().string()); });
  EXPECT_CONTAINS(m, dir.path().string());
  write_file(dir / "one.txt", {'a'});
  EXPECT_CONTAINS(error_of([&] { data::load_char_text((dir / "one.txt").string()); }), "one.txt");
}

TEST(CorruptText, BytesThatAreNotUtf8AreCharacters) {
  // The models are byte-level: invalid UTF-8 (a lone continuation byte, 0xFF, NUL) is a
  // vocabulary entry like any other, not an error; a byte unseen in training is one.
  TempDir dir;
  Bytes text;
  for (int i = 0; i < 50; ++i)
    for (const uint8_t c : {uint8_t('a'), uint8_t(0xFF), uint8_t(0x80), uint8_t(0), uint8_t(0xC3)})
      text.push_back(c);
  write_file(dir / "binary.txt", text);
  const data::CharText t = data::load_char_text((dir / "binary.txt").string());
  EXPECT_EQ(t.vocabulary.size(), 5u);
  EXPECT_EQ(uint8_t(t.vocabulary.back()), 0xFF);
  text.push_back(0xFE);  // only in the validation split
  write_file(dir / "unseen.txt", text);
  const std::string m = error_of([&] { data::load_char_text((dir / "unseen.txt").string()); });
  EXPECT_CONTAINS(m, "unseen.txt");
  EXPECT_CONTAINS(m, "0xFE");
}

}  // namespace
}  // namespace mixp
