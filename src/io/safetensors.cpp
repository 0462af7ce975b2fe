// safetensors: the writer, and a reader that checks every field before it copies a byte.
#include "mixp/io/safetensors.h"

#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <bit>
#include <cerrno>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <limits>
#include <nlohmann/json.hpp>
#include <optional>
#include <set>
#include <utility>

#include "io/safetensors_layout.h"
#include "io/write_hook.h"
#include "mixp/error.h"

namespace mixp::io {

static_assert(std::endian::native == std::endian::little,
              "safetensors data is little-endian; mixp stores tensors in native order");

namespace {

using nlohmann::json;

constexpr const char* kMetadataKey = "__metadata__";

thread_local detail::AtomicWriteHook t_write_hook;

std::string system_reason() { return std::strerror(errno); }

}  // namespace

std::vector<uint8_t> encode_safetensors(const std::vector<std::pair<std::string, Tensor>>& tensors,
                                        const std::map<std::string, std::string>& metadata) {
  std::vector<const std::pair<std::string, Tensor>*> sorted;
  for (const auto& t : tensors) {
    MIXP_CHECK(t.first != kMetadataKey, "safetensors: a tensor may not be named ", kMetadataKey);
    MIXP_CHECK(!t.first.empty(), "safetensors: a tensor has an empty name");
    MIXP_CHECK(t.second.defined(), "safetensors: tensor '", t.first, "' is undefined");
    sorted.push_back(&t);
  }
  std::sort(sorted.begin(), sorted.end(), [](auto* a, auto* b) { return a->first < b->first; });
  for (size_t i = 1; i < sorted.size(); ++i)
    MIXP_CHECK(sorted[i]->first != sorted[i - 1]->first, "safetensors: tensor '", sorted[i]->first,
               "' is given twice");

  json header = json::object();
  if (!metadata.empty()) {
    json m = json::object();
    for (const auto& [k, v] : metadata) m[k] = v;
    header[kMetadataKey] = m;
  }
  uint64_t offset = 0;
  for (const auto* t : sorted) {
    const Tensor& x = t->second;
    json shape = json::array();
    for (int64_t d : x.shape().dims()) shape.push_back(d);
    const uint64_t bytes = x.nbytes();
    header[t->first] = {{"dtype", safetensors_dtype_name(x.dtype())},
                        {"shape", shape},
                        {"data_offsets", {offset, offset + bytes}}};
    offset += bytes;
  }
  std::string text = header.dump();
  // Hugging Face pads the header with spaces so that the data starts 8-byte aligned.
  text.append((8 - text.size() % 8) % 8, ' ');

  std::vector<uint8_t> out(8 + text.size() + offset);
  const uint64_t n = text.size();
  std::memcpy(out.data(), &n, 8);
  std::memcpy(out.data() + 8, text.data(), text.size());
  uint8_t* data = out.data() + 8 + text.size();
  for (const auto* t : sorted) {
    const size_t bytes = t->second.nbytes();
    if (bytes) std::memcpy(data, t->second.raw_data(), bytes);
    data += bytes;
  }
  return out;
}

void write_safetensors(const std::string& path,
                       const std::vector<std::pair<std::string, Tensor>>& tensors,
                       const std::map<std::string, std::string>& metadata) {
  const std::vector<uint8_t> bytes = encode_safetensors(tensors, metadata);
  write_file_atomically(path, bytes);
}

SafetensorsFile decode_safetensors(std::span<const uint8_t> bytes, const std::string& source,
                                   MemoryTag tag) {
  const detail::SafetensorsLayout layout = detail::parse_safetensors_layout(bytes, source);
  SafetensorsFile file;
  file.metadata = layout.metadata;
  for (const detail::SafetensorsEntry& e : layout.entries)
    file.tensors[e.name] = from_buffer(layout.data.data() + e.begin, Shape(e.shape), e.dtype, tag);
  return file;
}

SafetensorsFile read_safetensors(const std::string& path, MemoryTag tag) {
  std::ifstream in(path, std::ios::binary);
  MIXP_CHECK(in, path, ": cannot open: ", system_reason());
  in.seekg(0, std::ios::end);
  const std::streamoff size = in.tellg();
  MIXP_CHECK(size >= 0, path, ": cannot read its size");
  in.seekg(0);
  std::vector<uint8_t> bytes(static_cast<size_t>(size));
  in.read(reinterpret_cast<char*>(bytes.data()), size);
  MIXP_CHECK(in || size == 0, path, ": read failed after ", in.gcount(), " of ", size, " bytes");
  return decode_safetensors(bytes, path, tag);
}

namespace detail {
ScopedAtomicWriteHook::ScopedAtomicWriteHook(AtomicWriteHook hook)
    : previous_(std::exchange(t_write_hook, std::move(hook))) {}
ScopedAtomicWriteHook::~ScopedAtomicWriteHook() { t_write_hook = std::move(previous_); }
}  // namespace detail

namespace {
// The first element of `t` that is a NaN or an infinity, and its value.
template <typename T>
std::optional<std::pair<int64_t, double>> first_nonfinite(const Tensor& t) {
  const T* p = t.data<T>();
  const int64_t n = t.numel();
  for (int64_t i = 0; i < n; ++i)
    if (const double v = double(p[i]); !std::isfinite(v)) return std::make_pair(i, v);
  return std::nullopt;
}
}  // namespace

std::optional<NonFiniteElement> find_nonfinite(const SafetensorsFile& file) {
  for (const auto& [name, t] : file.tensors) {
    std::optional<std::pair<int64_t, double>> at;
    switch (t.dtype()) {
      case DType::f32: at = first_nonfinite<float>(t); break;
      case DType::f64: at = first_nonfinite<double>(t); break;
      case DType::f16: at = first_nonfinite<float16>(t); break;
      case DType::bf16: at = first_nonfinite<bfloat16>(t); break;
      case DType::e4m3: at = first_nonfinite<float8_e4m3>(t); break;
      case DType::e5m2: at = first_nonfinite<float8_e5m2>(t); break;
      case DType::i32:
      case DType::i64:
      case DType::u8: break;
    }
    if (at) return NonFiniteElement{.tensor = name, .element = at->first, .value = at->second};
  }
  return std::nullopt;
}

void check_finite(const SafetensorsFile& file, const std::string& source) {
  const std::optional<NonFiniteElement> bad = find_nonfinite(file);
  MIXP_CHECK(!bad, source, ": tensor '", bad->tensor, "' holds ", bad->value, " at element ",
             bad->element, " (its values must be finite)");
}

void write_file_atomically(const std::string& path, std::span<const uint8_t> bytes) {
  namespace fs = std::filesystem;
  const fs::path target(path);
  const fs::path folder = target.has_parent_path() ? target.parent_path() : fs::path(".");
  std::string temp_name = ".";  // built by appends: GCC 12 misreads "." + string (-Wrestrict)
  temp_name.append(target.filename().string()).append(".tmp.").append(std::to_string(::getpid()));
  const fs::path temp = folder / temp_name;
  const int fd = ::open(temp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  MIXP_CHECK(fd >= 0, path, ": cannot create the temporary file ", temp.string(), ": ",
             system_reason());
  size_t done = 0;
  while (done < bytes.size()) {
    const ssize_t w = ::write(fd, bytes.data() + done, bytes.size() - done);
    if (w < 0 && errno == EINTR) continue;
    if (w <= 0) {
      const std::string reason = system_reason();
      ::close(fd);
      ::unlink(temp.c_str());
      MIXP_CHECK(false, path, ": write failed: ", reason);
    }
    done += size_t(w);
  }
  if (::fsync(fd) != 0 || ::close(fd) != 0) {
    const std::string reason = system_reason();
    ::unlink(temp.c_str());
    MIXP_CHECK(false, path, ": fsync failed: ", reason);
  }
  if (t_write_hook) t_write_hook(temp.string(), path);
  if (::rename(temp.c_str(), target.c_str()) != 0) {
    const std::string reason = system_reason();
    ::unlink(temp.c_str());
    MIXP_CHECK(false, path, ": rename from ", temp.string(), " failed: ", reason);
  }
  const int dir = ::open(folder.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  MIXP_CHECK(dir >= 0, path, ": cannot open its folder to fsync it: ", system_reason());
  const int synced = ::fsync(dir);
  const std::string reason = synced != 0 ? system_reason() : "";
  ::close(dir);
  MIXP_CHECK(synced == 0, path, ": fsync of the folder failed: ", reason);
}

void write_file_atomically(const std::string& path, std::string_view text) {
  write_file_atomically(
      path, std::span<const uint8_t>(reinterpret_cast<const uint8_t*>(text.data()), text.size()));
}

}  // namespace mixp::io
