// mixp convert: bit-exact conversion of hex bit patterns, a line in, a line out.
//
// The input streams through in batches: each batch is parsed, decoded exactly to fp32, rounded
// into the target format and printed. The formats that mixp stores use the bulk kernels of
// mixp/convert.h; any other format, rounding mode or overflow mode uses the emulator.
#include <algorithm>
#include <bit>
#include <cstring>
#include <optional>
#include <string>
#include <type_traits>
#include <vector>

#include "commands.h"
#include "line_reader.h"
#include "mixp/convert.h"
#include "mixp/dtype.h"
#include "mixp/error.h"
#include "mixp/format.h"

namespace mixp::cli {
namespace {

constexpr size_t kBatch = 1 << 16;

// A format on one side of the conversion, and the dtype whose bulk kernels serve it, if any.
struct Side {
  Format format;
  std::optional<DType> dtype;
  int hex_digits;
  uint32_t code_limit;  // codes must be below this
};

Side make_side(const std::string& name) {
  Side s{parse_format(name), std::nullopt, 0, 0};
  s.format.validate();
  const int bits = s.format.total_bits();
  s.hex_digits = (bits + 3) / 4;
  s.code_limit = bits >= 32 ? 0xffffffffu : (1u << bits);
  for (DType d : {DType::f32, DType::f16, DType::bf16, DType::e4m3, DType::e5m2}) {
    if (s.format == parse_format(name_of(d))) s.dtype = d;
  }
  return s;
}

int hex_value(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return -1;
}

std::string quoted(std::string_view line) {
  constexpr size_t kShown = 40;
  std::string s(line.substr(0, kShown));
  for (char& c : s) {
    if (static_cast<unsigned char>(c) < 0x20 || static_cast<unsigned char>(c) >= 0x7f) c = '?';
  }
  return "'" + s + (line.size() > kShown ? "...'" : "'");
}

uint32_t parse_line(std::string_view line, const Side& side, uint64_t line_number) {
  if (!line.empty() && line.back() == '\r') line.remove_suffix(1);
  const std::string what = "a bit pattern of " + side.format.name() + " in " +
                           std::to_string(side.hex_digits) + " hex digits";
  MIXP_CHECK(!line.empty(), "line ", line_number, ": empty line; expected ", what);
  MIXP_CHECK(line.size() == size_t(side.hex_digits), "line ", line_number, ": ", quoted(line),
             " has ", line.size(), " characters; expected ", what);
  uint32_t code = 0;
  for (char c : line) {
    const int v = hex_value(c);
    MIXP_CHECK(v >= 0, "line ", line_number, ": ", quoted(line), " is not ", what);
    code = (code << 4) | uint32_t(v);
  }
  MIXP_CHECK(side.code_limit == 0xffffffffu || code < side.code_limit, "line ", line_number, ": ",
             quoted(line), " has more than the ", side.format.total_bits(), " bits of ",
             side.format.name());
  return code;
}

template <typename T>
constexpr bool kIsFp8 = std::is_same_v<T, float8_e4m3> || std::is_same_v<T, float8_e5m2>;

class Converter {
 public:
  explicit Converter(const ConvertOptions& o)
      : from_(make_side(o.from)),
        to_(make_side(o.to)),
        rounding_(parse_rounding(o.rounding)),
        overflow_(o.saturate ? Overflow::saturate : Overflow::inf_or_nan),
        seed_(o.seed) {}

  const Side& from() const { return from_; }
  const Side& to() const { return to_; }

  /// codes[i] is the pattern of line first_line + i (0-based); it is replaced by the result.
  /// If a value cannot be encoded, codes keeps the results before it and the error is returned.
  std::optional<Error> run(std::vector<uint32_t>& codes, uint64_t first_line) {
    values_.resize(codes.size());
    decode(codes);
    return encode(codes, first_line);
  }

 private:
  template <typename T>
  void decode_bulk(const std::vector<uint32_t>& codes, std::vector<T>& narrow) {
    narrow.resize(codes.size());
    for (size_t i = 0; i < codes.size(); ++i) narrow[i] = T::from_bits(decltype(T::bits)(codes[i]));
    if constexpr (kIsFp8<T>) {
      convert(std::span<const T>(narrow), values_, 1.0f);
    } else {
      convert(std::span<const T>(narrow), values_);
    }
  }

  template <typename T>
  void encode_bulk(std::vector<uint32_t>& codes, std::vector<T>& narrow) {
    narrow.resize(codes.size());
    if constexpr (kIsFp8<T>) {
      convert(values_, std::span<T>(narrow), 1.0f, overflow_);
    } else {
      convert(values_, std::span<T>(narrow));
    }
    for (size_t i = 0; i < codes.size(); ++i) codes[i] = narrow[i].bits;
  }

  void decode(const std::vector<uint32_t>& codes) {
    switch (from_.dtype.value_or(DType::u8)) {
      case DType::f32:
        for (size_t i = 0; i < codes.size(); ++i) values_[i] = std::bit_cast<float>(codes[i]);
        return;
      case DType::f16: return decode_bulk(codes, f16_);
      case DType::bf16: return decode_bulk(codes, bf16_);
      case DType::e4m3: return decode_bulk(codes, e4m3_);
      case DType::e5m2: return decode_bulk(codes, e5m2_);
      default:
        for (size_t i = 0; i < codes.size(); ++i) values_[i] = mixp::decode(from_.format, codes[i]);
        return;
    }
  }

  std::optional<Error> encode(std::vector<uint32_t>& codes, uint64_t first_line) {
    // The bulk kernels round to nearest even; f16 and bf16 ones overflow to infinity only.
    const bool nearest = rounding_ == Rounding::nearest_even;
    const bool to_inf = overflow_ == Overflow::inf_or_nan;
    const DType target = to_.dtype.value_or(DType::u8);
    if (target == DType::f32) {
      for (size_t i = 0; i < codes.size(); ++i) codes[i] = std::bit_cast<uint32_t>(values_[i]);
      return std::nullopt;
    }
    if (nearest && to_inf && target == DType::f16) {
      encode_bulk(codes, f16_);
      return std::nullopt;
    }
    if (nearest && to_inf && target == DType::bf16) {
      encode_bulk(codes, bf16_);
      return std::nullopt;
    }
    if (nearest && target == DType::e4m3) {
      encode_bulk(codes, e4m3_);
      return std::nullopt;
    }
    if (nearest && target == DType::e5m2) {
      encode_bulk(codes, e5m2_);
      return std::nullopt;
    }

    random_.assign(codes.size(), 0);
    if (rounding_ == Rounding::stochastic) {
      philox_words(PhiloxState{seed_, 0, first_line}, 0, random_.data(), codes.size());
    }
    for (size_t i = 0; i < codes.size(); ++i) {
      try {
        codes[i] = mixp::encode(to_.format, values_[i], rounding_, overflow_, random_[i]);
      } catch (const Error& e) {
        codes.resize(i);
        return Error(detail::concat("line ", first_line + i + 1, ": ", e.message()),
                     std::source_location::current());
      }
    }
    return std::nullopt;
  }

  Side from_, to_;
  Rounding rounding_;
  Overflow overflow_;
  uint64_t seed_;
  std::vector<float> values_;
  std::vector<float16> f16_;
  std::vector<bfloat16> bf16_;
  std::vector<float8_e4m3> e4m3_;
  std::vector<float8_e5m2> e5m2_;
  std::vector<uint32_t> random_;
};

void write_codes(const std::vector<uint32_t>& codes, int digits, std::FILE* out,
                 std::string& buffer) {
  static constexpr char kHex[] = "0123456789abcdef";
  buffer.resize(codes.size() * size_t(digits + 1));
  char* p = buffer.data();
  for (uint32_t c : codes) {
    for (int d = digits - 1; d >= 0; --d) *p++ = kHex[(c >> (4 * d)) & 0xfu];
    *p++ = '\n';
  }
  const size_t size = size_t(p - buffer.data());
  MIXP_CHECK(std::fwrite(buffer.data(), 1, size, out) == size,
             "cannot write the output: ", std::strerror(errno));
}

}  // namespace

int run_convert(const ConvertOptions& options, std::FILE* in, std::FILE* out) {
  Converter converter(options);
  std::vector<uint32_t> codes;
  codes.reserve(kBatch);
  std::string out_buffer;
  uint64_t line_number = 0;  // lines parsed so far
  uint64_t batch_first = 0;  // 0-based number of the first line in `codes`

  auto flush = [&] {
    if (codes.empty()) return;
    std::optional<Error> failure = converter.run(codes, batch_first);
    write_codes(codes, converter.to().hex_digits, out, out_buffer);
    if (failure) {
      std::fflush(out);
      throw *failure;
    }
    batch_first += codes.size();
    codes.clear();
  };
  auto take_line = [&](std::string_view line) {
    try {
      codes.push_back(parse_line(line, converter.from(), line_number + 1));
    } catch (const Error&) {
      flush();  // the lines before the bad one are still converted and written
      throw;
    }
    ++line_number;
    if (codes.size() == kBatch) flush();
  };

  for_each_line(in, take_line);
  flush();
  MIXP_CHECK(std::fflush(out) == 0, "cannot write the output: ", std::strerror(errno));
  return 0;
}

}  // namespace mixp::cli
