// mixp/diag/stats.h — what a tensor's values would do in other number formats, in one pass.
//
// tensor_stats() reads a tensor of any dtype once and returns, in fp64 and int64:
//   - count, zeros, non-finite values, and min and max |x| over the non-zero finite values;
//   - a log2 histogram of |x| over the non-zero finite values, one bucket per binade
//     [2^e, 2^(e+1)) for e in [-40, 40), plus an "under" bucket (|x| < 2^-40) and an "over"
//     bucket (|x| >= 2^40); and behind it a wider one, binades 2^-200 to 2^200 with the count
//     of exact powers of two (|x| == 2^e) in each, which makes the underflow at any
//     power-of-two scale exact without the values (underflow_fraction_at);
//   - for each FormatQuery {format, scale}: how many non-zero finite values x would, as
//     x * scale rounded to nearest even into the format, become zero (underflow), a non-zero
//     subnormal, or overflow (round to a magnitude above the format's max: inf, NaN, or the
//     clamp to max when saturating).
//
// The classification is exact for round-to-nearest-even. With m mantissa bits, smallest
// subnormal s, smallest normal n, largest finite value M and u = M's unit in the last place
// (the scaled value y = |x| * scale is formed in fp64, exact for power-of-two scales):
//   zero        y <= s / 2 (the tie goes to the even neighbour, 0). Without subnormals the
//               emulator rounds at the precision of normals and flushes what stays below n:
//               y < n - 2^(log2 n - m - 2).
//   subnormal   s / 2 < y < n - s / 2 (the tie at n - s/2 goes up to n, whose mantissa is even)
//   overflow    y > M + u / 2, or y == M + u / 2 when M's last mantissa bit is odd (IEEE
//               formats: all ones; OCP E4M3's M = 448 has mantissa 110, so 464 rounds to 448)
// tests/diag/stats_test.cpp checks these against round_to_format and the storage types'
// converters on boundary values and on many random ones.
//
// Fractions are of the non-zero finite values; a tensor without any has fractions 0.
//
// Example:
//
//   using namespace mixp::diag;
//   TensorStats s = tensor_stats(grad, standard_queries(/*scale=*/65536.0));
//   double lost = s.formats[0].underflow_fraction();      // fp16 at a loss scale of 2^16
//   double at_one = underflow_fraction_at(s, mixp::Format::fp16(), 1.0);   // from the histogram
//   int k = smallest_safe_scale_exponent(s, mixp::Format::fp16(), 0.999);  // 2^k keeps 99.9%
//   Tensor few = sample(big, 65536);                       // a deterministic subset
#pragma once

#include <array>
#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "mixp/format.h"
#include "mixp/tensor.h"

namespace mixp::diag {

inline constexpr int kHistogramMinExponent = -40;
inline constexpr int kHistogramMaxExponent = 40;
inline constexpr int kBinades = kHistogramMaxExponent - kHistogramMinExponent;
/// Buckets: [0] under 2^-40; [1 + e + 40] the binade [2^e, 2^(e+1)); [kBinades + 1] 2^40 and up.
inline constexpr int kHistogramBuckets = kBinades + 2;
/// The wide exponent counts behind the scale searches: binades 2^e for e in [-200, 200), which
/// hold every non-zero fp32 value and the fp64 values any loss scale cares about.
inline constexpr int kWideMinExponent = -200;
inline constexpr int kWideBinades = 400;

/// A format to test the values against, after multiplying them by `scale` (> 0, finite).
struct FormatQuery {
  Format format;
  double scale = 1.0;
  std::string label{};  ///< for reports; empty: format.name()
};

/// fp16, bf16, e4m3 and e5m2, all at `scale`.
std::vector<FormatQuery> standard_queries(double scale = 1.0);

struct FormatCounts {
  FormatQuery query;
  int64_t underflow = 0;  ///< non-zero values that would round to zero
  int64_t subnormal = 0;  ///< ... to a non-zero subnormal
  int64_t overflow = 0;   ///< ... to a magnitude above the format's max
  int64_t of = 0;         ///< the non-zero finite values tested
  double underflow_fraction() const;
  double subnormal_fraction() const;
  double overflow_fraction() const;
};

struct TensorStats {
  int64_t count = 0;
  int64_t zeros = 0;
  int64_t non_finite = 0;
  double min_abs = 0.0;  ///< over the non-zero finite values; 0 when there are none
  double max_abs = 0.0;
  std::array<int64_t, kHistogramBuckets> histogram{};
  /// Per binade e in [-200, 200): the values in [2^e, 2^(e+1)), and those exactly 2^e. Values
  /// outside count in the first or last binade (and never as powers of two).
  std::array<int64_t, kWideBinades> wide{};
  std::array<int64_t, kWideBinades> powers_of_two{};
  std::vector<FormatCounts> formats;

  int64_t nonzero_finite() const { return count - zeros - non_finite; }
  /// Adds `other` (the same queries, in the same order) into this; throws mixp::Error otherwise.
  void merge(const TensorStats& other);
};

/// The statistics of every element of `t` (any dtype, any shape). Throws mixp::Error for an
/// undefined tensor or a query whose scale is not positive and finite.
TensorStats tensor_stats(const Tensor& t, std::span<const FormatQuery> queries = {});
/// The same for plain values (the reference the tests and tools feed directly).
TensorStats value_stats(std::span<const double> values, std::span<const FormatQuery> queries = {});

/// The histogram bucket of a non-zero finite magnitude `a`.
int histogram_bucket(double a);

/// The fraction of the non-zero finite values that `format` flushes to zero at `scale` (a power
/// of two), from the wide binades: exact for formats with subnormals (their zero threshold
/// s / 2 is a power of two) while the threshold s / (2 scale) lies in [2^-199, 2^199]; without
/// subnormals the whole binade just below n / scale counts as flushed (all but its top
/// 2^-(m+2) does). Throws mixp::Error when `scale` is not a power of two.
double underflow_fraction_at(const TensorStats& s, const Format& format, double scale);
/// The smallest k in [-150, 150] such that at the scale 2^k at most (1 - keep) of the non-zero
/// finite values underflow in `format` (keep 0.999: 99.9% stay representable); nothing when no
/// k there does. A tensor without non-zero finite values gives -150.
std::optional<int> smallest_safe_scale_exponent(const TensorStats& s, const Format& format,
                                                double keep);
/// The largest k such that max_abs * 2^k does not overflow `format`; nothing for a tensor
/// without non-zero finite values (every scale is safe).
std::optional<int> largest_safe_scale_exponent(double max_abs, const Format& format);

/// Whether y (> 0) rounds to zero, to a non-zero subnormal, or overflows in `format`.
inline constexpr uint64_t kSampleStream = 0x5a3b1e;

enum class Fate : uint8_t { zero = 0, subnormal = 1, normal = 2, overflow = 3 };
Fate fate_of(const Format& format, double y);

/// At most `max_elements` (>= 1) elements of `t`, flattened, in t's dtype: `t` itself when it
/// has no more, else one element chosen by Philox (seed 0, stream kSampleStream) from each of
/// max_elements strides of ceil(numel / max_elements) elements (the last may be shorter), so
/// the choice is deterministic and spread over the whole tensor.
Tensor sample(const Tensor& t, int64_t max_elements);

}  // namespace mixp::diag
