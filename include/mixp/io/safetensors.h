// mixp/io/safetensors.h — tensors in Hugging Face's safetensors format, and atomic file writes.
//
// A safetensors file is: an 8-byte little-endian header length N, N bytes of JSON (padded with
// spaces to a multiple of 8), then the raw little-endian data of every tensor. The header maps
// each tensor name to {"dtype", "shape", "data_offsets": [begin, end]} (offsets into the data
// section), plus an optional "__metadata__" map of strings. mixp writes the tensors sorted by
// name, packed without gaps, as Hugging Face's library does, so that `safetensors.torch.load_file`
// reads a mixp model.safetensors by the PyTorch names of its tensors.
//
// dtype names: F32, F64, F16, BF16, F8_E4M3, F8_E5M2, I32, I64, U8.
//
// Example:
//
//   mixp::io::write_safetensors("model.safetensors", {{"fc.weight", w}, {"fc.bias", b}},
//                               {{"format", "pt"}});
//   mixp::io::SafetensorsFile f = mixp::io::read_safetensors("model.safetensors");
//   mixp::Tensor w2 = f.tensors.at("fc.weight");     // same shape, dtype and bits as w
//
// Reading validates before trusting: every failure throws mixp::Error naming the file, the
// tensor and the problem (a header length beyond the file or above 100 MB, malformed JSON, an
// unknown dtype, a shape whose byte size is not the span of its offsets, offsets out of bounds,
// unsorted, overlapping or leaving gaps, a name given twice).
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "mixp/dtype.h"
#include "mixp/tensor.h"

namespace mixp::io {

/// The largest header read_safetensors accepts.
inline constexpr uint64_t kMaxSafetensorsHeader = 100u << 20;

/// "F32", "BF16", "F8_E4M3", ... for a dtype.
const char* safetensors_dtype_name(DType dtype);
/// The dtype of a safetensors name; throws mixp::Error for names mixp does not store.
DType parse_safetensors_dtype(std::string_view name);

struct SafetensorsFile {
  std::map<std::string, Tensor> tensors;
  std::map<std::string, std::string> metadata;
};

/// The bytes of a safetensors file holding `tensors` (names unique and not "__metadata__";
/// throws mixp::Error otherwise) and `metadata`.
std::vector<uint8_t> encode_safetensors(const std::vector<std::pair<std::string, Tensor>>& tensors,
                                        const std::map<std::string, std::string>& metadata = {});
/// Writes encode_safetensors(...) to `path` atomically (write_file_atomically).
void write_safetensors(const std::string& path,
                       const std::vector<std::pair<std::string, Tensor>>& tensors,
                       const std::map<std::string, std::string>& metadata = {});

/// Parses and validates a whole file's bytes; `source` names it in error messages. The
/// tensors are new copies tagged `tag`.
SafetensorsFile decode_safetensors(std::span<const uint8_t> bytes, const std::string& source,
                                   MemoryTag tag = MemoryTag::parameter);
SafetensorsFile read_safetensors(const std::string& path, MemoryTag tag = MemoryTag::parameter);

/// Where a floating-point tensor of a file holds a NaN or an infinity.
struct NonFiniteElement {
  std::string tensor;
  int64_t element = 0;  ///< the flat index of the first such element
  double value = 0.0;
};
/// The first NaN or infinity of `file`'s floating-point tensors, by tensor name and element;
/// nothing when all are finite. Reading never refuses such values (a diagnostic may need to
/// see them); what continues training from a file refuses them with check_finite().
std::optional<NonFiniteElement> find_nonfinite(const SafetensorsFile& file);
/// Throws mixp::Error naming `source` and find_nonfinite(file) when there is one.
void check_finite(const SafetensorsFile& file, const std::string& source);

/// Writes `bytes` to `path` so that a crash leaves either the old file or the new one: a
/// temporary file in the same folder, fsync, rename over `path`, then fsync of the folder.
/// Throws mixp::Error naming the path and the system's reason.
void write_file_atomically(const std::string& path, std::span<const uint8_t> bytes);
void write_file_atomically(const std::string& path, std::string_view text);

}  // namespace mixp::io
