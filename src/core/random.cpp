#include "mixp/random.h"

#include <cmath>

namespace mixp {
namespace {
constexpr uint32_t kMul0 = 0xD2511F53u, kMul1 = 0xCD9E8D57u;    // round multipliers
constexpr uint32_t kWeyl0 = 0x9E3779B9u, kWeyl1 = 0xBB67AE85u;  // key schedule increments

inline void mulhilo(uint32_t a, uint32_t b, uint32_t& hi, uint32_t& lo) {
  const uint64_t p = uint64_t(a) * b;
  hi = uint32_t(p >> 32);
  lo = uint32_t(p);
}

inline std::array<uint32_t, 4> block(uint64_t block_index, const PhiloxState& s) {
  return philox4x32_10({uint32_t(block_index), uint32_t(block_index >> 32), uint32_t(s.stream),
                        uint32_t(s.stream >> 32)},
                       {uint32_t(s.seed), uint32_t(s.seed >> 32)});
}
}  // namespace

std::array<uint32_t, 4> philox4x32_10(std::array<uint32_t, 4> c, std::array<uint32_t, 2> k) {
  for (int round = 0; round < 10; ++round) {
    uint32_t hi0, lo0, hi1, lo1;
    mulhilo(kMul0, c[0], hi0, lo0);
    mulhilo(kMul1, c[2], hi1, lo1);
    c = {hi1 ^ c[1] ^ k[0], lo1, hi0 ^ c[3] ^ k[1], lo0};
    k[0] += kWeyl0;
    k[1] += kWeyl1;
  }
  return c;
}

uint32_t philox_word(const PhiloxState& state, uint64_t index) {
  const uint64_t i = state.offset + index;
  return block(i / 4, state)[i % 4];
}

void philox_words(const PhiloxState& state, uint64_t first, uint32_t* out, uint64_t count) {
  uint64_t i = state.offset + first;
  const uint64_t end = i + count;
  while (i < end) {
    const std::array<uint32_t, 4> words = block(i / 4, state);
    for (uint64_t w = i % 4; w < 4 && i < end; ++w, ++i) *out++ = words[w];
  }
}

float Philox::normal() {
  // u1 in (0, 1] so that log(u1) is finite.
  const float u1 = float((next_u32() >> 8) + 1) * 0x1p-24f;
  const float u2 = uniform();
  return std::sqrt(-2.0f * std::log(u1)) * std::cos(6.2831853071795864769f * u2);
}

}  // namespace mixp
