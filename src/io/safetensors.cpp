// safetensors: the writer, and a reader that checks every field before it copies a byte.
#include "mixp/io/safetensors.h"

#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <bit>
#include <cerrno>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <limits>
#include <nlohmann/json.hpp>
#include <set>

#include "mixp/error.h"

namespace mixp::io {

static_assert(std::endian::native == std::endian::little,
              "safetensors data is little-endian; mixp stores tensors in native order");

namespace {

using nlohmann::json;

struct DTypeName {
  DType dtype;
  const char* name;
};
constexpr DTypeName kNames[] = {
    {DType::f32, "F32"},   {DType::f64, "F64"},      {DType::f16, "F16"},
    {DType::bf16, "BF16"}, {DType::e4m3, "F8_E4M3"}, {DType::e5m2, "F8_E5M2"},
    {DType::i32, "I32"},   {DType::i64, "I64"},      {DType::u8, "U8"},
};
static_assert(std::size(kNames) == size_t(kDTypeCount), "a dtype without a safetensors name");

constexpr const char* kMetadataKey = "__metadata__";

std::string system_reason() { return std::strerror(errno); }

// A non-negative integer of a JSON value that fits in uint64_t.
bool as_u64(const json& v, uint64_t& out) {
  if (v.is_number_unsigned()) {
    out = v.get<uint64_t>();
    return true;
  }
  if (v.is_number_integer() && v.get<int64_t>() >= 0) {
    out = uint64_t(v.get<int64_t>());
    return true;
  }
  return false;
}

struct Entry {
  std::string name;
  DType dtype;
  std::vector<int64_t> shape;
  uint64_t begin, end;
};

}  // namespace

const char* safetensors_dtype_name(DType dtype) {
  for (const DTypeName& n : kNames)
    if (n.dtype == dtype) return n.name;
  MIXP_ASSERT(false, "no safetensors name for dtype ", int(dtype));
  return "";
}

DType parse_safetensors_dtype(std::string_view name) {
  for (const DTypeName& n : kNames)
    if (name == n.name) return n.dtype;
  std::string known;
  for (const DTypeName& n : kNames) {
    if (!known.empty()) known.append(", ");
    known.append(n.name);
  }
  MIXP_CHECK(false, "unknown safetensors dtype '", name, "' (mixp reads ", known, ")");
  return DType::f32;
}

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
  const std::string where = source + ": ";
  MIXP_CHECK(bytes.size() >= 8, where, "too short for a safetensors file (", bytes.size(),
             " bytes; the header length alone takes 8)");
  uint64_t n = 0;
  std::memcpy(&n, bytes.data(), 8);
  MIXP_CHECK(n <= kMaxSafetensorsHeader, where, "header length ", n, " is above the limit of ",
             kMaxSafetensorsHeader, " bytes");
  MIXP_CHECK(n <= bytes.size() - 8, where, "header length ", n, " runs past the end of the file (",
             bytes.size() - 8, " bytes follow the length)");
  MIXP_CHECK(n >= 2, where, "header length ", n, " is too short for a JSON object");
  const std::string_view text(reinterpret_cast<const char*>(bytes.data() + 8), size_t(n));
  const std::span<const uint8_t> data = bytes.subspan(size_t(8 + n));

  // nlohmann keeps the last of duplicate keys silently; the callback sees each key first.
  std::set<std::string> seen;
  std::string duplicate;
  const json::parser_callback_t on_event = [&](int depth, json::parse_event_t event, json& parsed) {
    if (event == json::parse_event_t::key && depth == 1 && parsed.is_string()) {
      const std::string& key = parsed.get_ref<const std::string&>();
      if (!seen.insert(key).second && duplicate.empty()) duplicate = key;
    }
    return true;
  };
  json header;
  try {
    header = json::parse(text, on_event);
  } catch (const json::parse_error& e) {
    MIXP_CHECK(false, where, "the header is not valid JSON: ", e.what());
  }
  MIXP_CHECK(header.is_object(), where, "the header is not a JSON object");
  MIXP_CHECK(duplicate.empty(), where, "tensor '", duplicate, "' is named twice in the header");

  SafetensorsFile file;
  std::vector<Entry> entries;
  for (const auto& [name, value] : header.items()) {
    if (name == kMetadataKey) {
      MIXP_CHECK(value.is_object(), where, kMetadataKey, " is not a JSON object");
      for (const auto& [k, v] : value.items()) {
        MIXP_CHECK(v.is_string(), where, kMetadataKey, " value of '", k, "' is not a string");
        file.metadata[k] = v.get<std::string>();
      }
      continue;
    }
    const std::string t = where + "tensor '" + name + "': ";
    MIXP_CHECK(value.is_object(), t, "its entry is not a JSON object");
    for (const auto& [k, v] : value.items()) {
      (void)v;
      MIXP_CHECK(k == "dtype" || k == "shape" || k == "data_offsets", t, "unknown field '", k, "'");
    }
    MIXP_CHECK(value.contains("dtype") && value["dtype"].is_string(), t, "no dtype string");
    MIXP_CHECK(value.contains("shape") && value["shape"].is_array(), t, "no shape array");
    MIXP_CHECK(value.contains("data_offsets") && value["data_offsets"].is_array() &&
                   value["data_offsets"].size() == 2,
               t, "data_offsets is not an array of two offsets");
    Entry e{name, DType::f32, {}, 0, 0};
    try {
      e.dtype = parse_safetensors_dtype(value["dtype"].get<std::string>());
    } catch (const Error& err) {
      MIXP_CHECK(false, t, err.message());
    }
    MIXP_CHECK(value["shape"].size() <= size_t(kMaxDims), t, "shape has ", value["shape"].size(),
               " dimensions; mixp tensors have at most ", kMaxDims);
    uint64_t numel = 1;
    bool overflow = false;
    for (const json& d : value["shape"]) {
      uint64_t size = 0;
      MIXP_CHECK(as_u64(d, size) && size <= uint64_t(std::numeric_limits<int64_t>::max()), t,
                 "shape ", value["shape"].dump(),
                 " holds a size that is not a non-negative integer");
      e.shape.push_back(int64_t(size));
      if (size != 0 && numel > std::numeric_limits<uint64_t>::max() / size) overflow = true;
      numel *= size;
    }
    MIXP_CHECK(as_u64(value["data_offsets"][0], e.begin) && as_u64(value["data_offsets"][1], e.end),
               t, "data_offsets ", value["data_offsets"].dump(), " are not non-negative integers");
    MIXP_CHECK(e.begin <= e.end, t, "data_offsets ", value["data_offsets"].dump(),
               " end before they begin");
    MIXP_CHECK(e.end <= data.size(), t, "data_offsets ", value["data_offsets"].dump(),
               " run past the end of the data (", data.size(), " bytes)");
    const uint64_t size = uint64_t(size_of(e.dtype));
    MIXP_CHECK(!overflow && numel <= std::numeric_limits<uint64_t>::max() / size &&
                   numel * size == e.end - e.begin,
               t, "shape ", value["shape"].dump(), " of ", value["dtype"].get<std::string>(),
               " needs ", overflow ? std::string("more than 2^64") : std::to_string(numel * size),
               " bytes but data_offsets ", value["data_offsets"].dump(), " span ", e.end - e.begin);
    entries.push_back(std::move(e));
  }

  // Sorted by offset, the spans must tile the data exactly.
  std::sort(entries.begin(), entries.end(), [](const Entry& a, const Entry& b) {
    return a.begin != b.begin ? a.begin < b.begin : a.end < b.end;
  });
  uint64_t cursor = 0;
  for (size_t i = 0; i < entries.size(); ++i) {
    const Entry& e = entries[i];
    if (e.begin < cursor)
      MIXP_CHECK(false, where, "tensor '", e.name, "' at [", e.begin, ", ", e.end,
                 ") overlaps tensor '", entries[i - 1].name, "' ending at ", cursor);
    MIXP_CHECK(e.begin == cursor, where, "a gap of ", e.begin - cursor, " bytes before tensor '",
               e.name, "' at offset ", e.begin);
    cursor = e.end;
  }
  MIXP_CHECK(cursor == data.size(), where, data.size() - cursor,
             " bytes of data after the last tensor are not covered by any tensor");

  for (const Entry& e : entries)
    file.tensors[e.name] = from_buffer(data.data() + e.begin, Shape(e.shape), e.dtype, tag);
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
