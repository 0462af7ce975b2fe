// Character-level text: bytes as tokens, the vocabulary from the training split alone.
#include <array>
#include <cerrno>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <string_view>

#include "mixp/data/dataset.h"
#include "mixp/error.h"

namespace mixp::data {
namespace {

std::string read_file(const std::string& path) {
  std::error_code ec;
  MIXP_CHECK(std::filesystem::is_regular_file(path, ec), path,
             ": no such file (or not a regular file)");
  std::FILE* file = std::fopen(path.c_str(), "rb");
  MIXP_CHECK(file != nullptr, path, ": cannot open: ", std::strerror(errno));
  std::string text;
  constexpr size_t kChunk = size_t(1) << 20;
  for (;;) {
    const size_t old_size = text.size();
    text.resize(old_size + kChunk);
    const size_t got = std::fread(text.data() + old_size, 1, kChunk, file);
    text.resize(old_size + got);
    if (got < kChunk) break;
  }
  const bool failed = std::ferror(file) != 0;
  std::fclose(file);
  MIXP_CHECK(!failed, path, ": read error");
  return text;
}

std::string describe_byte(unsigned char byte) {
  char text[32];
  if (byte >= 0x20 && byte < 0x7f) {
    std::snprintf(text, sizeof text, "'%c' (0x%02X)", byte, unsigned(byte));
  } else {
    std::snprintf(text, sizeof text, "0x%02X", unsigned(byte));
  }
  return text;
}

// The token of each byte; -1 for a byte outside the vocabulary.
using TokenTable = std::array<int, 256>;

TokenTable token_table(const std::string& vocabulary) {
  TokenTable token{};
  token.fill(-1);
  for (size_t i = 0; i < vocabulary.size(); ++i)
    token[static_cast<unsigned char>(vocabulary[i])] = int(i);
  return token;
}

// The tokens of `text` as u8 (a byte vocabulary has at most 256 entries); `unknown` is called
// with the first byte outside the vocabulary and its position (counted from `offset`), and
// must throw.
template <typename Unknown>
Tensor tokens_of(std::string_view text, const TokenTable& token, int64_t offset,
                 Unknown&& unknown) {
  Tensor tokens = empty({int64_t(text.size())}, DType::u8, MemoryTag::data);
  uint8_t* out = tokens.data<uint8_t>();
  for (size_t i = 0; i < text.size(); ++i) {
    const auto byte = static_cast<unsigned char>(text[i]);
    if (token[byte] < 0) unknown(byte, offset + int64_t(i));
    out[i] = uint8_t(token[byte]);
  }
  return tokens;
}

}  // namespace

CharText load_char_text(const std::string& path, const CharTextOptions& options) {
  const double fraction = options.validation_fraction;
  MIXP_CHECK(fraction >= 0.0 && fraction < 1.0, "load_char_text: ", path,
             ": validation_fraction must be in [0, 1), got ", fraction);
  const std::string text = read_file(path);
  const int64_t n = int64_t(text.size());
  MIXP_CHECK(n > 0, path, ": the text is empty");
  // As nanoGPT: the first floor(n * (1 - fraction)) characters train, the rest validate.
  const int64_t n_train = int64_t(std::floor(double(n) * (1.0 - fraction)));
  const int64_t n_val = n - n_train;
  MIXP_CHECK(n_train > 0 && (fraction == 0.0 || n_val > 0), path, ": ", n,
             " bytes are too short to split into training and validation with "
             "validation_fraction ",
             fraction, " (", n_train, " and ", n_val, " bytes)");

  std::array<bool, 256> seen{};
  for (int64_t i = 0; i < n_train; ++i) seen[static_cast<unsigned char>(text[size_t(i)])] = true;
  CharText result;
  result.path = path;
  for (int byte = 0; byte < 256; ++byte)
    if (seen[size_t(byte)]) result.vocabulary.push_back(static_cast<char>(byte));
  const TokenTable token = token_table(result.vocabulary);
  result.train_tokens = tokens_of(std::string_view(text).substr(0, size_t(n_train)), token, 0,
                                  [&](unsigned char, int64_t) {});
  result.validation_tokens = tokens_of(
      std::string_view(text).substr(size_t(n_train)), token, n_train,
      [&](unsigned char byte, int64_t at) {
        MIXP_CHECK(false, path, ": byte ", describe_byte(byte), " at position ", at,
                   " of the validation split does not occur in the training split (the first ",
                   n_train, " bytes), so it has no token");
      });
  return result;
}

Tensor tokenize_text(const std::string& path, const std::string& vocabulary) {
  MIXP_CHECK(!vocabulary.empty() && vocabulary.size() <= 256, "reading ", path,
             " needs a vocabulary of 1 to 256 characters; the model's has ", vocabulary.size());
  const std::string text = read_file(path);
  MIXP_CHECK(!text.empty(), path, ": the text is empty");
  return tokens_of(text, token_table(vocabulary), 0, [&](unsigned char byte, int64_t at) {
    MIXP_CHECK(false, path, ": character ", describe_byte(byte), " at position ", at,
               " is not in the model's vocabulary of ", vocabulary.size(), " characters");
  });
}

}  // namespace mixp::data
