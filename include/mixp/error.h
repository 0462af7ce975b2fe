// mixp/error.h — the one exception type of mixp, and the two checking macros.
//
// The library never exits or aborts. A caller's mistake (a bad shape, an unknown format name, a
// malformed file) is reported with MIXP_CHECK, which throws mixp::Error carrying the message, the
// offending values and the source location. A broken internal invariant is reported with
// MIXP_ASSERT, which throws mixp::Error marked as a bug in mixp.
//
// Example:
//
//   void set_scale(float s) {
//     MIXP_CHECK(s > 0.0f, "set_scale: the scale must be positive, got ", s);
//   }
//   try { set_scale(-1.0f); }
//   catch (const mixp::Error& e) {
//     std::puts(e.what());      // "set_scale: the scale must be positive, got -1 (scale.cpp:12)"
//     std::puts(e.message());   // "set_scale: the scale must be positive, got -1"
//   }
#pragma once

#include <sstream>
#include <stdexcept>
#include <string>
#include <version>
#if defined(__cpp_lib_source_location)
#include <source_location>
#endif

namespace mixp {

#if defined(__cpp_lib_source_location)
/// Where an error was raised.
using SourceLocation = std::source_location;
#else
/// The file and line of std::source_location, for compilers that cannot use their standard
/// library's (clang 14 with libstdc++ 12, which builds the fuzzers in fuzz/).
struct SourceLocation {
  static constexpr SourceLocation current(const char* file = __builtin_FILE(),
                                          unsigned line = __builtin_LINE()) noexcept {
    return {file, line};
  }
  constexpr const char* file_name() const noexcept { return file_; }
  constexpr unsigned line() const noexcept { return line_; }
  const char* file_;
  unsigned line_;
};
#endif

/// Thrown for every error mixp reports. what() is message() followed by the source location.
class Error : public std::runtime_error {
 public:
  Error(std::string message, SourceLocation where);

  /// The message alone, without the source location.
  const std::string& message() const noexcept { return message_; }
  /// True when the error is a broken internal invariant, that is a bug in mixp.
  bool is_internal() const noexcept { return internal_; }

  static Error internal(std::string message, SourceLocation where);

 private:
  Error(std::string message, SourceLocation where, bool internal);
  std::string message_;
  bool internal_ = false;
};

namespace detail {
template <typename... Parts>
std::string concat(const Parts&... parts) {
  std::ostringstream out;
  (out << ... << parts);
  return out.str();
}
}  // namespace detail

}  // namespace mixp

/// Throws mixp::Error with the concatenated message parts when `cond` is false.
#define MIXP_CHECK(cond, ...)                                                                      \
  do {                                                                                             \
    if (!(cond)) [[unlikely]]                                                                      \
      throw ::mixp::Error(::mixp::detail::concat(__VA_ARGS__), ::mixp::SourceLocation::current()); \
  } while (false)

/// For internal invariants: throws mixp::Error that says this is a bug in mixp.
#define MIXP_ASSERT(cond, ...)                                            \
  do {                                                                    \
    if (!(cond)) [[unlikely]]                                             \
      throw ::mixp::Error::internal(                                      \
          ::mixp::detail::concat("internal error (a bug in mixp): " #cond \
                                 " failed. " __VA_OPT__(, ) __VA_ARGS__), \
          ::mixp::SourceLocation::current());                             \
  } while (false)
