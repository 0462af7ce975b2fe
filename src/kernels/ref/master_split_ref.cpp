// The scalar kernels of kernels/master_split.h: the bits of every ISA's.
#include <bit>

#include "kernels/master_split_isa.h"
#include "mixp/float_types.h"

namespace mixp::kernels::ref {
namespace {
bool is_nan_bf16(uint16_t p) { return (p & 0x7fffu) > 0x7f80u; }
}  // namespace

void split_master_bf16(const float* master, int64_t n, uint16_t* param, uint16_t* low,
                       uint8_t* ties) {
  for (int64_t byte = 0; byte < (n + 7) / 8; ++byte) ties[byte] = 0;
  for (int64_t i = 0; i < n; ++i) {
    const uint32_t x = std::bit_cast<uint32_t>(master[i]);
    const uint16_t p = mixp::detail::round_f32_bits_to_bf16(x);
    const uint16_t l = uint16_t(x & 0xffffu);
    param[i] = p;
    low[i] = l;
    const bool tie_rounded_up = l == 0x8000u && p != uint16_t(x >> 16) && !is_nan_bf16(p);
    ties[i / 8] = uint8_t(ties[i / 8] | (uint8_t(tie_rounded_up) << (i % 8)));
  }
}

void join_master_bf16(const uint16_t* param, const uint16_t* low, const uint8_t* ties, int64_t n,
                      float* master) {
  for (int64_t i = 0; i < n; ++i) {
    const uint32_t p = param[i], l = low[i];
    const bool tie = (ties[i / 8] >> (i % 8)) & 1u;
    const bool up = !is_nan_bf16(uint16_t(p)) && (l > 0x8000u || (l == 0x8000u && tie));
    master[i] = std::bit_cast<float>(((p - uint32_t(up)) << 16) | l);
  }
}

}  // namespace mixp::kernels::ref
