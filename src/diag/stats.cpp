#include "mixp/diag/stats.h"

#include <algorithm>
#include <cmath>
#include <cstring>

#include "mixp/error.h"
#include "tensor/element.h"

namespace mixp::diag {
namespace {

// The three boundaries of fate_of for one format (see the header for their derivation).
struct Thresholds {
  double zero = 0.0;  // y < zero (or <= when zero_inclusive) rounds to 0
  bool zero_inclusive = true;
  double subnormal = 0.0;  // y < subnormal rounds to a subnormal
  double overflow = 0.0;   // y > overflow (or >= when overflow_inclusive) overflows
  bool overflow_inclusive = false;
};

Thresholds thresholds_of(const Format& f) {
  f.validate();
  Thresholds t;
  const double n = f.min_normal();
  if (f.subnormals) {
    const double s = f.min_subnormal();
    t.zero = s / 2;
    t.zero_inclusive = true;
    t.subnormal = n - s / 2;
  } else {
    t.zero = n - std::ldexp(n, -f.mantissa_bits - 2);
    t.zero_inclusive = false;
    t.subnormal = t.zero;
  }
  const double m = f.max();
  const double ulp = std::ldexp(1.0, std::ilogb(m) - f.mantissa_bits);
  t.overflow = m + ulp / 2;
  // The tie at M + u/2 goes to the even neighbour: above M when M's mantissa ends in 1.
  const uint32_t code =
      encode(f, static_cast<float>(m), Rounding::nearest_even, Overflow::saturate);
  t.overflow_inclusive = (code & 1u) != 0;
  return t;
}

Fate fate(const Thresholds& t, double y) {
  if (t.zero_inclusive ? y <= t.zero : y < t.zero) return Fate::zero;
  if (t.overflow_inclusive ? y >= t.overflow : y > t.overflow) return Fate::overflow;
  if (y < t.subnormal) return Fate::subnormal;
  return Fate::normal;
}

void check_query(const FormatQuery& q) {
  MIXP_CHECK(std::isfinite(q.scale) && q.scale > 0, "tensor_stats: the scale of the query for ",
             q.format.name(), " must be positive and finite, got ", q.scale);
}

double fraction(int64_t part, int64_t whole) {
  return whole > 0 ? double(part) / double(whole) : 0.0;
}

// Accumulates values one at a time; shared by tensor_stats and value_stats.
class Accumulator {
 public:
  explicit Accumulator(std::span<const FormatQuery> queries) {
    for (const FormatQuery& q : queries) {
      check_query(q);
      FormatCounts c;
      c.query = q;
      if (c.query.label.empty()) c.query.label = q.format.name();
      stats_.formats.push_back(c);
      thresholds_.push_back(thresholds_of(q.format));
    }
  }

  void add(double x) {
    ++stats_.count;
    if (x == 0.0) {
      ++stats_.zeros;
      return;
    }
    if (!std::isfinite(x)) {
      ++stats_.non_finite;
      return;
    }
    const double a = std::fabs(x);
    if (!any_) {
      stats_.min_abs = stats_.max_abs = a;
      any_ = true;
    } else {
      stats_.min_abs = std::min(stats_.min_abs, a);
      stats_.max_abs = std::max(stats_.max_abs, a);
    }
    ++stats_.histogram[size_t(histogram_bucket(a))];
    const int e = std::ilogb(a);
    const int w = std::clamp(e - kWideMinExponent, 0, kWideBinades - 1);
    ++stats_.wide[size_t(w)];
    if (w == e - kWideMinExponent && a == std::ldexp(1.0, e)) ++stats_.powers_of_two[size_t(w)];
    for (size_t i = 0; i < thresholds_.size(); ++i) {
      FormatCounts& c = stats_.formats[i];
      ++c.of;
      switch (fate(thresholds_[i], a * c.query.scale)) {
        case Fate::zero: ++c.underflow; break;
        case Fate::subnormal: ++c.subnormal; break;
        case Fate::overflow: ++c.overflow; break;
        case Fate::normal: break;
      }
    }
  }

  TensorStats take() { return std::move(stats_); }

 private:
  TensorStats stats_;
  std::vector<Thresholds> thresholds_;
  bool any_ = false;
};

bool same_query(const FormatQuery& a, const FormatQuery& b) {
  return a.format == b.format && a.scale == b.scale && a.label == b.label;
}

}  // namespace

std::vector<FormatQuery> standard_queries(double scale) {
  return {{.format = Format::fp16(), .scale = scale, .label = "fp16"},
          {.format = Format::bf16(), .scale = scale, .label = "bf16"},
          {.format = Format::e4m3(), .scale = scale, .label = "e4m3"},
          {.format = Format::e5m2(), .scale = scale, .label = "e5m2"}};
}

double FormatCounts::underflow_fraction() const { return fraction(underflow, of); }
double FormatCounts::subnormal_fraction() const { return fraction(subnormal, of); }
double FormatCounts::overflow_fraction() const { return fraction(overflow, of); }

void TensorStats::merge(const TensorStats& other) {
  MIXP_CHECK(formats.size() == other.formats.size(), "TensorStats::merge: ", formats.size(),
             " format queries against ", other.formats.size());
  for (size_t i = 0; i < formats.size(); ++i) {
    MIXP_CHECK(same_query(formats[i].query, other.formats[i].query), "TensorStats::merge: query ",
               i, " is ", formats[i].query.label, " at scale ", formats[i].query.scale,
               " here and ", other.formats[i].query.label, " at scale ",
               other.formats[i].query.scale, " there");
    formats[i].underflow += other.formats[i].underflow;
    formats[i].subnormal += other.formats[i].subnormal;
    formats[i].overflow += other.formats[i].overflow;
    formats[i].of += other.formats[i].of;
  }
  if (other.nonzero_finite() > 0) {
    min_abs = nonzero_finite() > 0 ? std::min(min_abs, other.min_abs) : other.min_abs;
    max_abs = nonzero_finite() > 0 ? std::max(max_abs, other.max_abs) : other.max_abs;
  }
  count += other.count;
  zeros += other.zeros;
  non_finite += other.non_finite;
  for (size_t i = 0; i < histogram.size(); ++i) histogram[i] += other.histogram[i];
  for (size_t i = 0; i < wide.size(); ++i) {
    wide[i] += other.wide[i];
    powers_of_two[i] += other.powers_of_two[i];
  }
}

int histogram_bucket(double a) {
  const int e = std::ilogb(a);
  if (e < kHistogramMinExponent) return 0;
  if (e >= kHistogramMaxExponent) return kHistogramBuckets - 1;
  return 1 + e - kHistogramMinExponent;
}

Fate fate_of(const Format& format, double y) { return fate(thresholds_of(format), y); }

TensorStats value_stats(std::span<const double> values, std::span<const FormatQuery> queries) {
  Accumulator acc(queries);
  for (double v : values) acc.add(v);
  return acc.take();
}

TensorStats tensor_stats(const Tensor& t, std::span<const FormatQuery> queries) {
  MIXP_CHECK(t.defined(), "tensor_stats: an undefined tensor");
  Accumulator acc(queries);
  const void* data = t.raw_data();
  const DType dtype = t.dtype();
  const int64_t n = t.numel();
  if (dtype == DType::f32) {  // the common case, without the per-element dtype switch
    const float* p = static_cast<const float*>(data);
    for (int64_t i = 0; i < n; ++i) acc.add(double(p[i]));
  } else {
    for (int64_t i = 0; i < n; ++i) acc.add(load_element(data, dtype, i));
  }
  return acc.take();
}

double underflow_fraction_at(const TensorStats& s, const Format& format, double scale) {
  int k = 0;
  MIXP_CHECK(std::isfinite(scale) && scale > 0 && std::frexp(scale, &k) == 0.5,
             "underflow_fraction_at: the scale must be a power of two, got ", scale);
  k -= 1;  // scale == 2^k
  format.validate();
  int64_t flushed = 0;
  if (format.subnormals) {
    // a * 2^k <= s / 2  <=>  a <= 2^t: the binades below t, and exactly 2^t.
    const int t = std::ilogb(format.min_subnormal()) - 1 - k;
    const int top = std::clamp(t - kWideMinExponent, 0, kWideBinades);
    for (int i = 0; i < top; ++i) flushed += s.wide[size_t(i)];
    if (top < kWideBinades && top == t - kWideMinExponent) flushed += s.powers_of_two[size_t(top)];
  } else {
    // Flushed below n (1 - 2^-(m+2)) / 2^k: every binade below log2(n) - k.
    const int t = std::ilogb(format.min_normal()) - k;
    const int top = std::clamp(t - kWideMinExponent, 0, kWideBinades);
    for (int i = 0; i < top; ++i) flushed += s.wide[size_t(i)];
  }
  return fraction(flushed, s.nonzero_finite());
}

std::optional<int> smallest_safe_scale_exponent(const TensorStats& s, const Format& format,
                                                double keep) {
  MIXP_CHECK(keep >= 0 && keep <= 1, "smallest_safe_scale_exponent: keep must be in [0, 1], got ",
             keep);
  for (int k = -150; k <= 150; ++k) {
    if (underflow_fraction_at(s, format, std::ldexp(1.0, k)) <= 1 - keep) return k;
  }
  return std::nullopt;
}

std::optional<int> largest_safe_scale_exponent(double max_abs, const Format& format) {
  if (!(max_abs > 0) || !std::isfinite(max_abs)) return std::nullopt;
  const Thresholds t = thresholds_of(format);
  // Start above the answer (max_abs * 2^k near the format's max) and walk down.
  int k = std::ilogb(format.max()) - std::ilogb(max_abs) + 2;
  while (fate(t, std::ldexp(max_abs, k)) == Fate::overflow) --k;
  return k;
}

Tensor sample(const Tensor& t, int64_t max_elements) {
  MIXP_CHECK(t.defined(), "sample: an undefined tensor");
  MIXP_CHECK(max_elements >= 1, "sample: max_elements must be at least 1, got ", max_elements);
  const int64_t n = t.numel();
  if (n <= max_elements) return t;
  const int64_t stride = (n + max_elements - 1) / max_elements;
  const int64_t count = (n + stride - 1) / stride;
  Tensor out = empty({count}, t.dtype(), MemoryTag::workspace);
  const size_t bytes = size_t(size_of(t.dtype()));
  const char* src = static_cast<const char*>(t.raw_data());
  char* dst = static_cast<char*>(out.raw_data());
  const PhiloxState rng{.seed = 0, .stream = kSampleStream};
  for (int64_t i = 0; i < count; ++i) {
    const int64_t start = i * stride;
    const int64_t len = std::min(stride, n - start);
    const int64_t pick = start + int64_t(philox_word(rng, uint64_t(i)) % uint64_t(len));
    std::memcpy(dst + size_t(i) * bytes, src + size_t(pick) * bytes, bytes);
  }
  return out;
}

}  // namespace mixp::diag
