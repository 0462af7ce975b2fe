// IDX files from bytes in memory: the validating parser and gzip decompression that read_idx()
// uses, apart from the file system and tensors so that the fuzzer (fuzz/) runs exactly them.
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "mixp/data/dataset.h"

namespace mixp::data::detail {

/// The decompressed bytes of a gzip file (one or more members, as gzip writes them). Throws
/// mixp::Error naming `source` for data that is not gzip, is corrupt or is cut short.
std::vector<uint8_t> gunzip(std::span<const uint8_t> bytes, const std::string& source);

/// Parses an IDX file's (decompressed) bytes. `ndim` > 0 demands exactly that many dimensions
/// (magic 0x00000800 + ndim); 0 takes any. `decompressed` only words the messages. Throws
/// mixp::Error naming `source` and the problem.
IdxArray parse_idx(std::span<const uint8_t> bytes, const std::string& source, int ndim,
                   bool decompressed = false);

}  // namespace mixp::data::detail
