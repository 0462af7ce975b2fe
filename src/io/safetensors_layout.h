// The validating parser of a safetensors file's header, apart from the tensors it describes:
// decode_safetensors() builds on it, and the fuzzer (fuzz/) runs it on arbitrary bytes without
// the rest of the library.
#pragma once

#include <cstdint>
#include <map>
#include <span>
#include <string>
#include <vector>

#include "mixp/dtype.h"

namespace mixp::io::detail {

struct SafetensorsEntry {
  std::string name;
  DType dtype = DType::f32;
  std::vector<int64_t> shape;
  uint64_t begin = 0, end = 0;  ///< offsets into the data section
};

struct SafetensorsLayout {
  std::vector<SafetensorsEntry> entries;  ///< sorted by offset; they tile the data exactly
  std::map<std::string, std::string> metadata;
  std::span<const uint8_t> data;  ///< the data section, within the bytes parsed
};

/// Checks every field of the header of `bytes` (the whole file) against the file: throws
/// mixp::Error naming `source`, the tensor and the problem (see mixp/io/safetensors.h).
SafetensorsLayout parse_safetensors_layout(std::span<const uint8_t> bytes,
                                           const std::string& source);

}  // namespace mixp::io::detail
