// IDX files (the MNIST format), plain or gzipped, validated before their contents are used.
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <filesystem>

#include "data/idx_parse.h"
#include "mixp/data/dataset.h"
#include "mixp/error.h"

namespace mixp::data {
namespace {

bool ends_with_gz(const std::string& path) {
  return path.size() >= 3 && path.compare(path.size() - 3, 3, ".gz") == 0;
}

// The bytes of a file, decompressed when its name ends in .gz.
std::vector<uint8_t> read_bytes(const std::string& path) {
  std::error_code ec;
  MIXP_CHECK(std::filesystem::is_regular_file(path, ec), path,
             ": no such file (or not a regular file)");
  std::FILE* file = std::fopen(path.c_str(), "rb");
  MIXP_CHECK(file != nullptr, path, ": cannot open: ", std::strerror(errno));
  // Read to the end whatever the size said, in case the file grew; the size is the first guess.
  std::vector<uint8_t> bytes(static_cast<size_t>(std::filesystem::file_size(path, ec)) + 1);
  size_t got = 0;
  for (;;) {
    got += std::fread(bytes.data() + got, 1, bytes.size() - got, file);
    if (got < bytes.size()) break;
    bytes.resize(2 * bytes.size());
  }
  bytes.resize(got);
  const bool failed = std::ferror(file) != 0;
  std::fclose(file);
  MIXP_CHECK(!failed, path, ": read error");
  return ends_with_gz(path) ? detail::gunzip(bytes, path) : bytes;
}

IdxArray parse_idx(const std::string& path, int ndim) {
  return detail::parse_idx(read_bytes(path), path, ndim, ends_with_gz(path));
}

// `directory`/`name`, or `directory`/`name`.gz when only that exists.
std::string find_idx(const std::string& directory, const std::string& name) {
  const std::filesystem::path plain = std::filesystem::path(directory) / name;
  const std::filesystem::path gz = std::filesystem::path(directory) / (name + ".gz");
  std::error_code ec;
  if (std::filesystem::is_regular_file(plain, ec)) return plain.string();
  if (std::filesystem::is_regular_file(gz, ec)) return gz.string();
  MIXP_CHECK(false, directory, ": missing IDX file: neither ", plain.string(), " nor ", gz.string(),
             " exists");
  return {};
}

ImageSet load_split(const std::string& images_path, const std::string& labels_path,
                    int64_t classes) {
  const IdxArray images = parse_idx(images_path, 3);
  const IdxArray labels = parse_idx(labels_path, 1);
  const int64_t n = images.dims[0], h = images.dims[1], w = images.dims[2];
  MIXP_CHECK(n == labels.dims[0], images_path, " holds ", n, " images but ", labels_path, " holds ",
             labels.dims[0], " labels");
  MIXP_CHECK(n > 0 && h > 0 && w > 0, images_path, ": no images (dimensions ",
             Shape(images.dims).to_string(), ")");
  ImageSet set;
  set.classes = classes;
  set.images = from_buffer(images.data.data(), {n, 1, h, w}, DType::u8, MemoryTag::data);
  set.labels = empty({n}, DType::i64, MemoryTag::data);
  int64_t* out = set.labels.data<int64_t>();
  for (int64_t i = 0; i < n; ++i) {
    const int64_t label = labels.data[size_t(i)];
    MIXP_CHECK(label < classes, labels_path, ": label ", label, " of sample ", i,
               " is out of range: ", classes, " classes allow labels 0 to ", classes - 1);
    out[i] = label;
  }
  return set;
}

}  // namespace

IdxArray read_idx(const std::string& path) { return parse_idx(path, 0); }

ImageClassification load_idx_classification(const std::string& directory, int64_t classes) {
  MIXP_CHECK(classes >= 1 && classes <= 256, "load_idx_classification: ", directory,
             ": classes must be in [1, 256] for byte labels, got ", classes);
  std::error_code ec;
  MIXP_CHECK(std::filesystem::is_directory(directory, ec), directory,
             ": no such directory (expected a folder of IDX files)");
  ImageClassification data;
  data.directory = directory;
  data.train = load_split(find_idx(directory, "train-images-idx3-ubyte"),
                          find_idx(directory, "train-labels-idx1-ubyte"), classes);
  data.test = load_split(find_idx(directory, "t10k-images-idx3-ubyte"),
                         find_idx(directory, "t10k-labels-idx1-ubyte"), classes);
  MIXP_CHECK(data.train.images.size(2) == data.test.images.size(2) &&
                 data.train.images.size(3) == data.test.images.size(3),
             directory, ": training images are ", data.train.images.size(2), "x",
             data.train.images.size(3), " but test images are ", data.test.images.size(2), "x",
             data.test.images.size(3));
  return data;
}

}  // namespace mixp::data
