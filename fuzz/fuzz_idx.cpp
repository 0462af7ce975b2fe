// libFuzzer target: read_idx()'s steps on arbitrary bytes. The first byte chooses how the rest
// is read: bit 0 set, as a .gz file (gunzip, then the IDX parser); bits 1-2, the dimensions
// demanded (0: any, 1: labels, 2: images 3, 3: any). A mixp::Error is a correct answer;
// anything else is a finding.
#include <cstddef>
#include <cstdint>
#include <span>
#include <vector>

#include "data/idx_parse.h"
#include "mixp/error.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size == 0) return 0;
  const bool gz = data[0] & 1;
  const int ndim = (data[0] >> 1 & 3) == 1 ? 1 : (data[0] >> 1 & 3) == 2 ? 3 : 0;
  const std::span<const uint8_t> rest(data + 1, size - 1);
  try {
    std::vector<uint8_t> plain;
    if (gz) plain = mixp::data::detail::gunzip(rest, "fuzz.gz");
    const std::span<const uint8_t> idx = gz ? std::span<const uint8_t>(plain) : rest;
    const mixp::data::IdxArray a = mixp::data::detail::parse_idx(idx, "fuzz", ndim, gz);
    // What load_idx_classification() relies on: the data is exactly the dimensions' product.
    uint64_t count = 1;
    for (const int64_t d : a.dims) count *= uint64_t(d);
    if (count != a.data.size() || (ndim > 0 && a.dims.size() != size_t(ndim))) __builtin_trap();
  } catch (const mixp::Error&) {
  }
  return 0;
}
