// The safetensors header: dtype names, and a parser that checks every field before anything
// is trusted. Needs only core/ (errors, dtypes), so that the fuzzer builds it alone.
#include "io/safetensors_layout.h"

#include <algorithm>
#include <cstring>
#include <limits>
#include <nlohmann/json.hpp>
#include <set>

#include "mixp/error.h"
#include "mixp/io/safetensors.h"

namespace mixp::io {
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

namespace detail {

SafetensorsLayout parse_safetensors_layout(std::span<const uint8_t> bytes,
                                           const std::string& source) {
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
  SafetensorsLayout layout;
  layout.data = bytes.subspan(size_t(8 + n));
  const std::span<const uint8_t> data = layout.data;

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
  } catch (const json::exception& e) {
    // parse_error, and out_of_range for numbers beyond a double ("1e999"): found by fuzzing.
    MIXP_CHECK(false, where, "the header is not valid JSON: ", e.what());
  }
  MIXP_CHECK(header.is_object(), where, "the header is not a JSON object");
  MIXP_CHECK(duplicate.empty(), where, "tensor '", duplicate, "' is named twice in the header");

  std::vector<SafetensorsEntry>& entries = layout.entries;
  for (const auto& [name, value] : header.items()) {
    if (name == kMetadataKey) {
      MIXP_CHECK(value.is_object(), where, kMetadataKey, " is not a JSON object");
      for (const auto& [k, v] : value.items()) {
        MIXP_CHECK(v.is_string(), where, kMetadataKey, " value of '", k, "' is not a string");
        layout.metadata[k] = v.get<std::string>();
      }
      continue;
    }
    const std::string t = where + "tensor '" + name + "': ";
    MIXP_CHECK(!name.empty(), where, "a tensor has an empty name");
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
    SafetensorsEntry e{name, DType::f32, {}, 0, 0};
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
  std::sort(entries.begin(), entries.end(),
            [](const SafetensorsEntry& a, const SafetensorsEntry& b) {
              return a.begin != b.begin ? a.begin < b.begin : a.end < b.end;
            });
  uint64_t cursor = 0;
  for (size_t i = 0; i < entries.size(); ++i) {
    const SafetensorsEntry& e = entries[i];
    if (e.begin < cursor)
      MIXP_CHECK(false, where, "tensor '", e.name, "' at [", e.begin, ", ", e.end,
                 ") overlaps tensor '", entries[i - 1].name, "' ending at ", cursor);
    MIXP_CHECK(e.begin == cursor, where, "a gap of ", e.begin - cursor, " bytes before tensor '",
               e.name, "' at offset ", e.begin);
    cursor = e.end;
  }
  MIXP_CHECK(cursor == data.size(), where, data.size() - cursor,
             " bytes of data after the last tensor are not covered by any tensor");
  return layout;
}

}  // namespace detail
}  // namespace mixp::io
