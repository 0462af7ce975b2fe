// IDX bytes and gzip streams, validated before their contents are used. Needs only core/ and
// zlib, so that the fuzzer builds it alone.
#include "data/idx_parse.h"

#include <zlib.h>

#include <algorithm>
#include <cstdio>
#include <cstring>
#include <limits>

#include "mixp/error.h"

namespace mixp::data::detail {
namespace {

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

// "[60000, 28, 28]", as Shape::to_string writes dimensions.
std::string dims_text(const std::vector<int64_t>& dims) {
  std::string s = "[";
  for (size_t i = 0; i < dims.size(); ++i) {
    if (i) s.append(", ");
    s.append(std::to_string(dims[i]));
  }
  return s.append("]");
}

}  // namespace

std::vector<uint8_t> gunzip(std::span<const uint8_t> bytes, const std::string& source) {
  MIXP_CHECK(bytes.size() >= 2 && bytes[0] == 0x1f && bytes[1] == 0x8b, source,
             ": not gzip data (a .gz file starts with 1F 8B)");
  std::vector<uint8_t> out;
  z_stream z{};
  // 16 + MAX_WBITS: a gzip wrapper (header and CRC-32 trailer), nothing else.
  MIXP_CHECK(inflateInit2(&z, 16 + MAX_WBITS) == Z_OK, source, ": cannot start zlib");
  z.next_in = const_cast<Bytef*>(bytes.data());
  size_t consumed = 0;
  int code = Z_OK;
  // zlib counts in 32-bit units: feed the input and take the output in chunks.
  for (;;) {
    if (z.avail_in == 0 && consumed < bytes.size()) {
      const size_t take =
          std::min<size_t>(bytes.size() - consumed, std::numeric_limits<uInt>::max());
      z.next_in = const_cast<Bytef*>(bytes.data() + consumed);
      z.avail_in = uInt(take);
      consumed += take;
    }
    // Output chunks grow with the output: few calls for a big file, little memory for a small one.
    const size_t old_size = out.size();
    const size_t chunk = std::clamp<size_t>(old_size, size_t(1) << 16, size_t(1) << 26);
    out.resize(old_size + chunk);
    z.next_out = out.data() + old_size;
    z.avail_out = uInt(chunk);
    code = inflate(&z, Z_NO_FLUSH);
    out.resize(old_size + (chunk - z.avail_out));
    if (code == Z_STREAM_END) {
      // Another member may follow, as `cat a.gz b.gz` makes.
      if (z.avail_in == 0 && consumed == bytes.size()) break;
      if (inflateReset(&z) != Z_OK) break;
      continue;
    }
    if (code == Z_BUF_ERROR && z.avail_in == 0 && consumed == bytes.size()) break;  // cut short
    if (code != Z_OK) break;
  }
  const std::string reason = z.msg ? z.msg : (code == Z_BUF_ERROR ? "unexpected end of data" : "");
  inflateEnd(&z);
  MIXP_CHECK(code == Z_STREAM_END, source, ": corrupt or truncated gzip data (",
             reason.empty() ? "zlib code " + std::to_string(code) : reason, ") after ", out.size(),
             " decompressed bytes");
  return out;
}

IdxArray parse_idx(std::span<const uint8_t> bytes, const std::string& source, int ndim,
                   bool decompressed) {
  const std::string& path = source;
  const std::string what = decompressed ? " decompressed bytes" : " bytes";
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
             " for dimensions ", dims_text(array.dims), ", found ", bytes.size());
  MIXP_CHECK(bytes.size() == expected, path, ": ", bytes.size() - expected,
             " unexpected bytes after the data: expected ", expected, what, " for dimensions ",
             dims_text(array.dims), ", found ", bytes.size());
  array.data.assign(bytes.begin() + std::ptrdiff_t(header), bytes.end());
  return array;
}

}  // namespace mixp::data::detail
