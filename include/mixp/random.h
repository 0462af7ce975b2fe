// mixp/random.h — the counter-based random number generator behind all of mixp's randomness.
//
// Philox4x32-10 (Salmon et al., "Parallel random numbers: as easy as 1, 2, 3", SC'11) maps a
// 128-bit counter and a 64-bit key to 128 random bits. Because any position of the stream can
// be computed directly, a random draw is a pure function of (seed, stream, offset): results do
// not depend on the thread count or on how the work is split, and a checkpoint only needs to
// remember the offset.
//
// mixp lays the 32-bit words out as one flat sequence per (seed, stream): word number `i` is
// word `i % 4` of the block with counter {i / 4 (64 bits), stream (64 bits)} under key `seed`.
//
// Example:
//
//   mixp::PhiloxState rng{/*seed=*/42, /*stream=*/7, /*offset=*/0};
//   uint32_t a = mixp::philox_word(rng, 0);     // the first word of this stream
//   mixp::Philox gen(rng);
//   float u = gen.uniform();                    // in [0, 1), advances gen.state().offset
//   uint32_t b = gen.next_u32();                // philox_word(rng, 2)
#pragma once

#include <array>
#include <cstdint>

namespace mixp {

/// The raw Philox4x32 block function with 10 rounds.
std::array<uint32_t, 4> philox4x32_10(std::array<uint32_t, 4> counter, std::array<uint32_t, 2> key);

/// Where a draw comes from: which generator (seed), which independent sequence (stream), and
/// how many 32-bit words of it have been used (offset).
struct PhiloxState {
  uint64_t seed = 0;
  uint64_t stream = 0;
  uint64_t offset = 0;

  friend bool operator==(const PhiloxState&, const PhiloxState&) = default;
};

/// Word `state.offset + index` of the stream (seed, stream).
uint32_t philox_word(const PhiloxState& state, uint64_t index);

/// Fills `out` with words state.offset + first ... + first + count - 1, four at a time.
void philox_words(const PhiloxState& state, uint64_t first, uint32_t* out, uint64_t count);

/// A sequential view of one stream. Cheap to copy; the state is the whole generator.
class Philox {
 public:
  explicit Philox(PhiloxState state = {}) : state_(state) {}

  uint32_t next_u32() {
    const uint32_t word = philox_word(state_, 0);
    ++state_.offset;
    return word;
  }
  /// Uniform in [0, 1): the top 24 bits of one word, so every value is exact in fp32.
  float uniform() { return float(next_u32() >> 8) * 0x1p-24f; }
  /// Standard normal, by Box-Muller on two words.
  float normal();

  const PhiloxState& state() const { return state_; }
  void set_state(const PhiloxState& state) { state_ = state; }

 private:
  PhiloxState state_;
};

}  // namespace mixp
