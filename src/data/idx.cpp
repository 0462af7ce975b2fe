// IDX files (the MNIST format), plain or gzipped, validated before their contents are used.
#include <zlib.h>

#include <array>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <limits>

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
  std::vector<uint8_t> bytes;
  constexpr size_t kChunk = size_t(1) << 20;
  if (ends_with_gz(path)) {
    gzFile file = gzopen(path.c_str(), "rb");
    MIXP_CHECK(file != nullptr, path, ": cannot open: ", std::strerror(errno));
    for (;;) {
      const size_t old_size = bytes.size();
      bytes.resize(old_size + kChunk);
      const int got = gzread(file, bytes.data() + old_size, unsigned(kChunk));
      if (got < 0) {
        int code = 0;
        const std::string message = gzerror(file, &code);
        gzclose(file);
        MIXP_CHECK(false, path, ": cannot decompress: ", message);
      }
      bytes.resize(old_size + size_t(got));
      if (size_t(got) < kChunk) break;
    }
    // A gzip stream cut short reads as a short file; zlib reports it only through gzerror.
    int code = Z_OK;
    const std::string message = gzerror(file, &code);
    gzclose(file);
    MIXP_CHECK(code == Z_OK, path, ": corrupt or truncated gzip data (", message, ") after ",
               bytes.size(), " decompressed bytes");
    return bytes;
  }
  std::FILE* file = std::fopen(path.c_str(), "rb");
  MIXP_CHECK(file != nullptr, path, ": cannot open: ", std::strerror(errno));
  for (;;) {
    const size_t old_size = bytes.size();
    bytes.resize(old_size + kChunk);
    const size_t got = std::fread(bytes.data() + old_size, 1, kChunk, file);
    bytes.resize(old_size + got);
    if (got < kChunk) break;
  }
  const bool failed = std::ferror(file) != 0;
  std::fclose(file);
  MIXP_CHECK(!failed, path, ": read error");
  return bytes;
}

uint32_t big_endian_u32(const uint8_t* p) {
  return (uint32_t(p[0]) << 24) | (uint32_t(p[1]) << 16) | (uint32_t(p[2]) << 8) | uint32_t(p[3]);
}

const char* idx_type_name(uint8_t type) {
  switch (type) {
    case 0x08: return "unsigned byte";
    case 0x09: return "signed byte";
    case 0x0B: return "short";
    case 0x0C: return "int";
    case 0x0D: return "float";
    case 0x0E: return "double";
    default: return "unknown";
  }
}

std::string hex32(uint32_t value) {
  char text[16];
  std::snprintf(text, sizeof text, "0x%08X", value);
  return text;
}

// `ndim` > 0 demands exactly that many dimensions (magic 0x00000800 + ndim); 0 takes any.
IdxArray parse_idx(const std::string& path, int ndim) {
  std::vector<uint8_t> bytes = read_bytes(path);
  const std::string what = ends_with_gz(path) ? " decompressed bytes" : " bytes";
  MIXP_CHECK(bytes.size() >= 4, path, ": truncated: expected at least 4", what,
             " (the IDX magic number), found ", bytes.size());
  const uint32_t magic = big_endian_u32(bytes.data());
  const uint8_t type = bytes[2];
  const int dims_in_file = bytes[3];
  MIXP_CHECK(bytes[0] == 0 && bytes[1] == 0, path, ": wrong magic number ", hex32(magic),
             ": not an IDX file (the first two bytes must be zero)");
  MIXP_CHECK(type == 0x08, path, ": magic number ", hex32(magic), " says IDX data type 0x",
             std::hex, int(type), std::dec, " (", idx_type_name(type),
             "); only unsigned byte (0x08) is supported");
  if (ndim > 0) {
    const uint32_t expected = 0x800u + uint32_t(ndim);
    MIXP_CHECK(magic == expected, path, ": wrong magic number ", hex32(magic), ", expected ",
               hex32(expected), " (IDX, unsigned byte, ", ndim,
               ndim == 1 ? " dimension: labels)" : " dimensions: images)");
  }
  MIXP_CHECK(dims_in_file >= 1 && dims_in_file <= kMaxDims, path, ": ", dims_in_file,
             " dimensions in the magic number ", hex32(magic), "; between 1 and ", kMaxDims,
             " are supported");

  const size_t header = 4 + 4 * size_t(dims_in_file);
  MIXP_CHECK(bytes.size() >= header, path, ": truncated: expected at least ", header, what,
             " (the header of ", dims_in_file, " dimensions), found ", bytes.size());
  IdxArray array;
  uint64_t count = 1;
  for (int d = 0; d < dims_in_file; ++d) {
    const uint32_t size = big_endian_u32(bytes.data() + 4 + 4 * size_t(d));
    MIXP_CHECK(size == 0 || count <= std::numeric_limits<uint64_t>::max() / 2 / size, path,
               ": dimensions too large to hold in memory");
    count *= size;
    array.dims.push_back(int64_t(size));
  }
  const uint64_t expected = header + count;
  MIXP_CHECK(bytes.size() >= expected, path, ": truncated: expected ", expected, what,
             " for dimensions ", Shape(array.dims).to_string(), ", found ", bytes.size());
  MIXP_CHECK(bytes.size() == expected, path, ": ", bytes.size() - expected,
             " unexpected bytes after the data: expected ", expected, what, " for dimensions ",
             Shape(array.dims).to_string(), ", found ", bytes.size());
  bytes.erase(bytes.begin(), bytes.begin() + std::ptrdiff_t(header));
  array.data = std::move(bytes);
  return array;
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
