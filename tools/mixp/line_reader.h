// Reading a stream line by line in large blocks, for the commands that filter millions of
// lines (convert, scaler-trace). The line given to the callback has no '\n'; a last line
// without one is still passed.
#pragma once

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <string>
#include <string_view>
#include <vector>

#include "mixp/error.h"

namespace mixp::cli {

template <typename OnLine>
void for_each_line(std::FILE* in, OnLine on_line) {
  std::vector<char> block(1 << 20);
  std::string pending;  // an incomplete last line of the previous read
  for (;;) {
    const size_t got = std::fread(block.data(), 1, block.size(), in);
    std::string_view chunk(block.data(), got);
    while (!chunk.empty()) {
      const size_t newline = chunk.find('\n');
      if (newline == std::string_view::npos) {
        pending.append(chunk);
        break;
      }
      if (pending.empty()) {
        on_line(chunk.substr(0, newline));
      } else {
        pending.append(chunk.substr(0, newline));
        on_line(std::string_view(pending));
        pending.clear();
      }
      chunk.remove_prefix(newline + 1);
    }
    if (got < block.size()) {
      MIXP_CHECK(!std::ferror(in), "cannot read the input: ", std::strerror(errno));
      break;
    }
  }
  if (!pending.empty()) on_line(std::string_view(pending));
}

}  // namespace mixp::cli
