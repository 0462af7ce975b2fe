// mixp scaler-trace: the loss scale of GradScaler over a sequence of steps, one found_inf flag
// (0 or 1) per input line, one "SCALE_BEFORE_HEX APPLIED" line out. The scale is updated by
// amp::update_scale, the very rule GradScaler::update() applies, so that a trace checks the
// library's code. The input streams through in blocks; the output is written in large pieces.
#include <bit>
#include <cerrno>
#include <cmath>
#include <cstring>
#include <string>
#include <string_view>
#include <vector>

#include "commands.h"
#include "line_reader.h"
#include "mixp/amp/grad_scaler.h"
#include "mixp/error.h"

namespace mixp::cli {
namespace {

constexpr size_t kOutputFlush = 1 << 20;

std::string quoted(std::string_view line) {
  constexpr size_t kShown = 40;
  std::string s(line.substr(0, kShown));
  for (char& c : s) {
    if (static_cast<unsigned char>(c) < 0x20 || static_cast<unsigned char>(c) >= 0x7f) c = '?';
  }
  return "'" + s + (line.size() > kShown ? "...'" : "'");
}

void write_all(std::string& buffer, std::FILE* out) {
  MIXP_CHECK(std::fwrite(buffer.data(), 1, buffer.size(), out) == buffer.size(),
             "cannot write the output: ", std::strerror(errno));
  buffer.clear();
}

amp::GradScalerOptions checked_options(const ScalerTraceOptions& o) {
  const float init = float(o.init);
  MIXP_CHECK(std::isfinite(init) && init > 0.0f,
             "--init must be positive and finite as an fp32 value, got ", o.init);
  MIXP_CHECK(std::isfinite(o.growth) && o.growth > 1.0, "--growth must be finite and > 1, got ",
             o.growth);
  MIXP_CHECK(o.backoff > 0.0 && o.backoff < 1.0, "--backoff must be in (0, 1), got ", o.backoff);
  MIXP_CHECK(o.interval >= 1, "--interval must be at least 1, got ", o.interval);
  amp::GradScalerOptions options;
  options.init_scale = o.init;
  options.growth_factor = o.growth;
  options.backoff_factor = o.backoff;
  options.growth_interval = o.interval;
  options.validate();
  return options;
}

}  // namespace

int run_scaler_trace(const ScalerTraceOptions& trace_options, std::FILE* in, std::FILE* out) {
  const amp::GradScalerOptions options = checked_options(trace_options);
  amp::ScaleState state;
  state.scale = float(options.init_scale);

  std::string output;
  output.reserve(kOutputFlush + 64);
  uint64_t line_number = 0;
  auto take_line = [&](std::string_view line) {
    ++line_number;
    if (!line.empty() && line.back() == '\r') line.remove_suffix(1);
    if (line.size() != 1 || (line[0] != '0' && line[0] != '1')) {
      write_all(output, out);  // the steps before the bad line are still written
      std::fflush(out);
      MIXP_CHECK(!line.empty(), "line ", line_number,
                 ": empty line; expected a found_inf flag, "
                 "0 or 1");
      MIXP_CHECK(false, "line ", line_number, ": ", quoted(line),
                 " is not a found_inf flag; expected 0 or 1");
    }
    const bool found_inf = line[0] == '1';
    static constexpr char kHex[] = "0123456789abcdef";
    const uint32_t bits = std::bit_cast<uint32_t>(state.scale);
    char text[11];
    for (int d = 0; d < 8; ++d) text[d] = kHex[(bits >> (28 - 4 * d)) & 0xfu];
    text[8] = ' ';
    text[9] = found_inf ? '0' : '1';
    text[10] = '\n';
    output.append(text, sizeof text);
    amp::update_scale(state, options, found_inf);
    if (output.size() >= kOutputFlush) write_all(output, out);
  };

  for_each_line(in, take_line);
  write_all(output, out);
  MIXP_CHECK(std::fflush(out) == 0, "cannot write the output: ", std::strerror(errno));
  return 0;
}

}  // namespace mixp::cli
