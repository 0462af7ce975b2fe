// libFuzzer target: the safetensors header parser of read_safetensors() on arbitrary bytes.
// A mixp::Error is a correct answer; anything else (another exception, a crash, a sanitizer
// report, a layout that breaks the parser's promises) is a finding.
#include <cstddef>
#include <cstdint>
#include <span>

#include "io/safetensors_layout.h"
#include "mixp/error.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::span<const uint8_t> bytes(data, size);
  mixp::io::detail::SafetensorsLayout layout;
  try {
    layout = mixp::io::detail::parse_safetensors_layout(bytes, "fuzz");
  } catch (const mixp::Error&) {
    return 0;
  }
  // What decode_safetensors() relies on: the spans tile the data section of the input, and
  // each is its shape times its dtype's size.
  if (layout.data.data() < data || layout.data.data() + layout.data.size() != data + size)
    __builtin_trap();
  uint64_t cursor = 0;
  for (const auto& e : layout.entries) {
    uint64_t bytes_needed = uint64_t(mixp::size_of(e.dtype));
    for (const int64_t d : e.shape) bytes_needed *= uint64_t(d);
    if (e.begin != cursor || e.end < e.begin || e.end - e.begin != bytes_needed) __builtin_trap();
    cursor = e.end;
  }
  if (cursor != layout.data.size()) __builtin_trap();
  return 0;
}
