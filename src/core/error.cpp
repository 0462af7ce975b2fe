#include "mixp/error.h"

#include <string_view>

namespace mixp {
namespace {
std::string with_location(const std::string& message, SourceLocation where) {
  std::string_view file = where.file_name();
  if (auto slash = file.rfind('/'); slash != std::string_view::npos) file.remove_prefix(slash + 1);
  return message + " (" + std::string(file) + ":" + std::to_string(where.line()) + ")";
}
}  // namespace

Error::Error(std::string message, SourceLocation where) : Error(std::move(message), where, false) {}

Error::Error(std::string message, SourceLocation where, bool internal)
    : std::runtime_error(with_location(message, where)),
      message_(std::move(message)),
      internal_(internal) {}

Error Error::internal(std::string message, SourceLocation where) {
  return Error(std::move(message), where, true);
}

}  // namespace mixp
