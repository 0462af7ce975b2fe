// IDX files and character text: read back what the test writes, and every bad file's error.
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <unistd.h>
#include <zlib.h>

#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "dataset/files.h"
#include "mixp/data/dataset.h"
#include "mixp/error.h"

namespace mixp::data {
namespace {

namespace fs = std::filesystem;
using test::idx_bytes;
using test::TempDir;
using test::write_file;
using test::write_gz;

// Runs `f`, expects mixp::Error, and returns its message.
template <typename F>
std::string error_of(F&& f) {
  try {
    f();
  } catch (const Error& e) {
    return e.message();
  }
  ADD_FAILURE() << "no mixp::Error";
  return {};
}

#define EXPECT_CONTAINS(text, part) \
  EXPECT_NE(std::string(text).find(part), std::string::npos) << "in: " << (text)

TEST(ReadIdx, PlainAndGzippedReadBackTheSameArray) {
  TempDir dir;
  std::vector<uint8_t> data(2 * 3 * 5);
  for (size_t i = 0; i < data.size(); ++i) data[i] = uint8_t(i * 7 + 1);
  const auto bytes = idx_bytes(0x803, {2, 3, 5}, data);
  write_file(dir / "a", bytes);
  write_gz(dir / "a.gz", bytes);
  for (const char* name : {"a", "a.gz"}) {
    const IdxArray array = read_idx((dir / name).string());
    EXPECT_EQ(array.dims, (std::vector<int64_t>{2, 3, 5})) << name;
    EXPECT_EQ(array.data, data) << name;
  }
}

TEST(ReadIdx, OneDimensionAndEmptyData) {
  TempDir dir;
  write_file(dir / "l", idx_bytes(0x801, {0}, {}));
  const IdxArray array = read_idx((dir / "l").string());
  EXPECT_EQ(array.dims, (std::vector<int64_t>{0}));
  EXPECT_TRUE(array.data.empty());
}

TEST(ReadIdx, MissingFileNamesIt) {
  TempDir dir;
  const std::string path = (dir / "nothing-here").string();
  EXPECT_CONTAINS(error_of([&] { read_idx(path); }), path);
  const std::string gz = (dir / "nothing-here.gz").string();
  EXPECT_CONTAINS(error_of([&] { read_idx(gz); }), gz);
}

TEST(ReadIdx, WrongMagicNumberNamesTheFile) {
  TempDir dir;
  const std::string path = (dir / "junk").string();
  write_file(path, {0x89, 'P', 'N', 'G', 0, 0, 0, 0});
  const std::string message = error_of([&] { read_idx(path); });
  EXPECT_CONTAINS(message, path);
  EXPECT_CONTAINS(message, "magic number 0x89504E47");
}

TEST(ReadIdx, OnlyUnsignedBytesAreSupported) {
  TempDir dir;
  const std::string path = (dir / "floats").string();
  write_file(path, idx_bytes(0xD01, {1}, {0, 0, 0, 0}));
  const std::string message = error_of([&] { read_idx(path); });
  EXPECT_CONTAINS(message, path);
  EXPECT_CONTAINS(message, "0x00000D01");
  EXPECT_CONTAINS(message, "only unsigned byte");
}

TEST(ReadIdx, TruncatedFileSaysHowManyBytesWereExpectedAndFound) {
  TempDir dir;
  auto bytes = idx_bytes(0x803, {4, 3, 3}, std::vector<uint8_t>(36, 9));  // 16 + 36 = 52 bytes
  bytes.resize(40);
  write_file(dir / "t", bytes);
  write_gz(dir / "t.gz", bytes);
  for (const char* name : {"t", "t.gz"}) {
    const std::string path = (dir / name).string();
    const std::string message = error_of([&] { read_idx(path); });
    EXPECT_CONTAINS(message, path);
    EXPECT_CONTAINS(message, "truncated: expected 52");
    EXPECT_CONTAINS(message, "found 40");
  }
  // Cut inside the header itself.
  write_file(dir / "h", {0, 0, 8, 3, 0, 0});
  const std::string header = error_of([&] { read_idx((dir / "h").string()); });
  EXPECT_CONTAINS(header, (dir / "h").string());
  EXPECT_CONTAINS(header, "truncated: expected at least 16");
  EXPECT_CONTAINS(header, "found 6");
}

TEST(ReadIdx, CutGzipStreamIsAnError) {
  TempDir dir;
  std::vector<uint8_t> data(5000);
  for (size_t i = 0; i < data.size(); ++i) data[i] = uint8_t((i * 2654435761u) >> 13);
  write_gz(dir / "full.gz", idx_bytes(0x801, {5000}, data));
  std::ifstream in(dir / "full.gz", std::ios::binary);
  std::vector<uint8_t> compressed((std::istreambuf_iterator<char>(in)), {});
  ASSERT_GT(compressed.size(), 100u);
  compressed.resize(compressed.size() / 2);
  const std::string path = (dir / "cut.gz").string();
  write_file(path, compressed);
  const std::string message = error_of([&] { read_idx(path); });
  EXPECT_CONTAINS(message, path);
}

TEST(ReadIdx, TrailingBytesAreAnError) {
  TempDir dir;
  auto bytes = idx_bytes(0x801, {3}, {1, 2, 3});
  bytes.push_back(4);
  const std::string path = (dir / "long").string();
  write_file(path, bytes);
  const std::string message = error_of([&] { read_idx(path); });
  EXPECT_CONTAINS(message, path);
  EXPECT_CONTAINS(message, "expected 11 bytes");
  EXPECT_CONTAINS(message, "found 12");
}

// A tiny MNIST-shaped folder: images of sample i are all pixel (i * 37) % 256, label i % 10.
void write_split(const fs::path& dir, const std::string& prefix, int64_t n, bool gz) {
  std::vector<uint8_t> pixels, labels;
  for (int64_t i = 0; i < n; ++i) {
    for (int p = 0; p < 4 * 3; ++p) pixels.push_back(uint8_t((i * 37) % 256));
    labels.push_back(uint8_t(i % 10));
  }
  const std::string ext = gz ? ".gz" : "";
  auto write = gz ? write_gz : write_file;
  write(dir / (prefix + "-images-idx3-ubyte" + ext), idx_bytes(0x803, {uint32_t(n), 4, 3}, pixels));
  write(dir / (prefix + "-labels-idx1-ubyte" + ext), idx_bytes(0x801, {uint32_t(n)}, labels));
}

TEST(LoadIdxClassification, ReadsPlainAndGzippedFolders) {
  for (const bool gz : {false, true}) {
    TempDir dir;
    write_split(dir.path(), "train", 23, gz);
    write_split(dir.path(), "t10k", 7, !gz);
    const ImageClassification data = load_idx_classification(dir.path().string());
    EXPECT_EQ(data.directory, dir.path().string());
    ASSERT_EQ(data.train.images.dtype(), DType::u8);
    ASSERT_EQ(data.train.images.shape(), (Shape{23, 1, 4, 3}));
    ASSERT_EQ(data.train.labels.dtype(), DType::i64);
    ASSERT_EQ(data.train.labels.shape(), (Shape{23}));
    ASSERT_EQ(data.test.images.shape(), (Shape{7, 1, 4, 3}));
    EXPECT_EQ(data.train.classes, 10);
    const uint8_t* px = data.train.images.data<uint8_t>();
    const int64_t* labels = data.train.labels.data<int64_t>();
    for (int64_t i = 0; i < 23; ++i) {
      EXPECT_EQ(labels[i], i % 10);
      for (int p = 0; p < 12; ++p) ASSERT_EQ(px[i * 12 + p], (i * 37) % 256);
    }
    EXPECT_EQ(data.train.images.tag(), MemoryTag::data);
  }
}

TEST(LoadIdxClassification, MissingFileAndFolderAreNamed) {
  TempDir dir;
  write_split(dir.path(), "train", 5, false);
  write_file(dir / "t10k-images-idx3-ubyte", idx_bytes(0x803, {1, 4, 3}, std::vector<uint8_t>(12)));
  const std::string message = error_of([&] { load_idx_classification(dir.path().string()); });
  EXPECT_CONTAINS(message, (dir / "t10k-labels-idx1-ubyte").string());
  EXPECT_CONTAINS(message, (dir / "t10k-labels-idx1-ubyte.gz").string());

  const std::string none = (dir / "no-such-folder").string();
  EXPECT_CONTAINS(error_of([&] { load_idx_classification(none); }), none);
}

TEST(LoadIdxClassification, ImagesWhereLabelsBelongIsAWrongMagicNumber) {
  TempDir dir;
  write_split(dir.path(), "train", 5, false);
  write_split(dir.path(), "t10k", 5, false);
  const fs::path labels = dir / "t10k-labels-idx1-ubyte";
  write_file(labels, idx_bytes(0x803, {5, 1, 1}, std::vector<uint8_t>(5)));
  const std::string message = error_of([&] { load_idx_classification(dir.path().string()); });
  EXPECT_CONTAINS(message, labels.string());
  EXPECT_CONTAINS(message, "wrong magic number 0x00000803, expected 0x00000801");
}

TEST(LoadIdxClassification, LabelOutOfRangeNamesTheFileAndTheSample) {
  TempDir dir;
  write_split(dir.path(), "train", 5, false);
  write_split(dir.path(), "t10k", 5, false);
  const fs::path labels = dir / "train-labels-idx1-ubyte";
  write_file(labels, idx_bytes(0x801, {5}, {0, 1, 2, 10, 4}));
  const std::string message = error_of([&] { load_idx_classification(dir.path().string()); });
  EXPECT_CONTAINS(message, labels.string());
  EXPECT_CONTAINS(message, "label 10 of sample 3");
  // With 11 classes the same file is fine; with 3 the first bad label is sample 3 again.
  EXPECT_NO_THROW(load_idx_classification(dir.path().string(), 11));
  EXPECT_CONTAINS(error_of([&] { load_idx_classification(dir.path().string(), 3); }),
                  "label 10 of sample 3");
}

TEST(LoadIdxClassification, ImageAndLabelCountsMustAgree) {
  TempDir dir;
  write_split(dir.path(), "train", 5, false);
  write_split(dir.path(), "t10k", 5, true);
  const fs::path labels = dir / "t10k-labels-idx1-ubyte.gz";
  write_gz(labels, idx_bytes(0x801, {4}, {0, 1, 2, 3}));
  const std::string message = error_of([&] { load_idx_classification(dir.path().string()); });
  EXPECT_CONTAINS(message, (dir / "t10k-images-idx3-ubyte.gz").string());
  EXPECT_CONTAINS(message, labels.string());
  EXPECT_CONTAINS(message, "5 images");
  EXPECT_CONTAINS(message, "4 labels");
}

TEST(LoadIdxClassification, FashionMnistFromDebian) {
  const std::string dir = "/usr/share/datasets/fashion-mnist";
  if (!fs::exists(fs::path(dir) / "train-images-idx3-ubyte.gz")) {
    GTEST_SKIP() << dir << " is not installed (dataset-fashion-mnist)";
  }
  const ImageClassification data = load_idx_classification(dir);
  EXPECT_EQ(data.train.images.shape(), (Shape{60000, 1, 28, 28}));
  EXPECT_EQ(data.test.images.shape(), (Shape{10000, 1, 28, 28}));
  EXPECT_EQ(data.train.labels.shape(), (Shape{60000}));
  EXPECT_EQ(data.test.labels.shape(), (Shape{10000}));
  EXPECT_EQ(data.train.classes, 10);
  // Fashion-MNIST is balanced: 6000 training and 1000 test images per class.
  std::vector<int64_t> train_counts(10), test_counts(10);
  for (int64_t i = 0; i < 60000; ++i) ++train_counts[size_t(data.train.labels.data<int64_t>()[i])];
  for (int64_t i = 0; i < 10000; ++i) ++test_counts[size_t(data.test.labels.data<int64_t>()[i])];
  EXPECT_EQ(train_counts, std::vector<int64_t>(10, 6000));
  EXPECT_EQ(test_counts, std::vector<int64_t>(10, 1000));
}

// ---- character text ----

TEST(CharText, VocabularyFromTheTrainingSplitAndTokensByPosition) {
  TempDir dir;
  const std::string text = "hello world, hello hello";  // 24 bytes: 21 train, 3 validate
  write_file(dir / "t.txt", std::vector<uint8_t>(text.begin(), text.end()));
  const CharText data = load_char_text((dir / "t.txt").string(), {.validation_fraction = 0.125});
  EXPECT_EQ(data.path, (dir / "t.txt").string());
  EXPECT_EQ(data.vocabulary, std::string(" ,dehlorw"));
  ASSERT_EQ(data.train_tokens.dtype(), DType::u8);  // one byte a token
  ASSERT_EQ(data.validation_tokens.dtype(), DType::u8);
  ASSERT_EQ(data.train_tokens.shape(), (Shape{21}));
  ASSERT_EQ(data.validation_tokens.shape(), (Shape{3}));
  std::string decoded;
  for (int64_t i = 0; i < 21; ++i) {
    decoded += data.vocabulary[size_t(data.train_tokens.data<uint8_t>()[i])];
  }
  for (int64_t i = 0; i < 3; ++i) {
    decoded += data.vocabulary[size_t(data.validation_tokens.data<uint8_t>()[i])];
  }
  EXPECT_EQ(decoded, text);
}

TEST(CharText, SplitIsNanoGptsFloor) {
  TempDir dir;
  std::string text;
  for (int i = 0; i < 1000; ++i) text += char('a' + i % 26);
  write_file(dir / "t.txt", std::vector<uint8_t>(text.begin(), text.end()));
  const CharText data = load_char_text((dir / "t.txt").string());
  EXPECT_EQ(data.train_tokens.numel(), 900);
  EXPECT_EQ(data.validation_tokens.numel(), 100);
  EXPECT_EQ(data.vocabulary.size(), 26u);
  const CharText all = load_char_text((dir / "t.txt").string(), {.validation_fraction = 0.0});
  EXPECT_EQ(all.train_tokens.numel(), 1000);
  EXPECT_EQ(all.validation_tokens.numel(), 0);
}

TEST(CharText, BytesAboveAsciiSortAsUnsigned) {
  TempDir dir;
  write_file(dir / "t.txt", {0xC3, 0xA9, 'a', 0x01, 'a', 0xC3});
  const CharText data = load_char_text((dir / "t.txt").string(), {.validation_fraction = 0.2});
  EXPECT_EQ(data.vocabulary, std::string("\x01"
                                         "a\xA9\xC3"));
  ASSERT_EQ(data.validation_tokens.numel(), 2);  // floor(6 * 0.8) = 4 bytes train
  EXPECT_EQ(data.validation_tokens.data<uint8_t>()[0], 1);
  EXPECT_EQ(data.validation_tokens.data<uint8_t>()[1], 3);
}

TEST(CharText, TokenizeTextUsesTheGivenVocabularyAndNamesAnUnknownCharacter) {
  TempDir dir;
  write_file(dir / "t.txt", {'b', 'a', 'c', 'a'});
  const Tensor tokens = tokenize_text((dir / "t.txt").string(), "abc");
  ASSERT_EQ(tokens.dtype(), DType::u8);
  ASSERT_EQ(tokens.shape(), (Shape{4}));
  EXPECT_EQ(tokens.to_vector(), (std::vector<double>{1, 0, 2, 0}));
  write_file(dir / "u.txt", {'a', 'a', 'Z'});
  try {
    (void)tokenize_text((dir / "u.txt").string(), "abc");
    FAIL() << "an unknown character was accepted";
  } catch (const Error& e) {
    EXPECT_THAT(e.message(), ::testing::HasSubstr("'Z' (0x5A) at position 2"));
    EXPECT_THAT(e.message(), ::testing::HasSubstr("vocabulary of 3 characters"));
  }
}

TEST(CharText, EmptyMissingAndTooShortFilesAreErrors) {
  TempDir dir;
  const std::string empty = (dir / "empty.txt").string();
  write_file(empty, {});
  std::string message = error_of([&] { load_char_text(empty); });
  EXPECT_CONTAINS(message, empty);
  EXPECT_CONTAINS(message, "empty");

  const std::string missing = (dir / "missing.txt").string();
  EXPECT_CONTAINS(error_of([&] { load_char_text(missing); }), missing);

  const std::string tiny = (dir / "tiny.txt").string();
  write_file(tiny, {'a'});  // floor(1 * 0.9) = 0 bytes to train on
  message = error_of([&] { load_char_text(tiny, {.validation_fraction = 0.1}); });
  EXPECT_CONTAINS(message, tiny);
  EXPECT_CONTAINS(message, "too short");
  EXPECT_CONTAINS(error_of([&] { load_char_text(tiny, {.validation_fraction = 1.0}); }), tiny);
}

TEST(CharText, ValidationByteUnseenInTrainingNamesTheByteAndItsPosition) {
  TempDir dir;
  const std::string path = (dir / "t.txt").string();
  const std::string text = "abababababababababaZ";  // 20 bytes; Z at 19, in validation
  write_file(path, std::vector<uint8_t>(text.begin(), text.end()));
  const std::string message = error_of([&] { load_char_text(path); });
  EXPECT_CONTAINS(message, path);
  EXPECT_CONTAINS(message, "'Z' (0x5A)");
  EXPECT_CONTAINS(message, "position 19");
}

}  // namespace
}  // namespace mixp::data
