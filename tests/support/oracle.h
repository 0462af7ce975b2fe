// Independent oracles for the number formats: slow, obviously correct code written from the
// definitions, used to check mixp's fast conversions and its emulator.
#pragma once

#include <cstdint>
#include <vector>

#include "mixp/format.h"

namespace mixp::test {

/// The value of `code` in `format` from the textbook formula, in double: (-1)^s * 2^(e - bias)
/// * (1 + m / 2^M), or 2^(1 - bias) * (m / 2^M) for subnormals. NaN and inf as the format says.
double slow_decode(const Format& format, uint32_t code);

/// The finite non-negative values of a format (up to 16 bits), sorted, with their codes.
struct ValueTable {
  std::vector<double> values;
  std::vector<uint32_t> codes;
};
ValueTable value_table(const Format& format);

/// The code a correct rounding of the finite, non-NaN `x` gives, found by searching the value
/// table: nearest (ties to even code), toward zero, up or down; overflow as in IEEE 754 and
/// OCP OFP8, decided on the rounded value with the exponent range unbounded.
uint32_t oracle_encode(const Format& format, const ValueTable& table, double x, Rounding rounding,
                       Overflow overflow);

}  // namespace mixp::test
