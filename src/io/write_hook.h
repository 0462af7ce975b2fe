// A test hook in write_file_atomically: the tests of torn writes stop a process between the
// durable temporary file and its rename, where a crash leaves a stray temporary file and the
// previous version of the target in place.
#pragma once

#include <functional>
#include <string>

namespace mixp::io::detail {

/// Receives the temporary file (written and fsynced) and the target, before the rename.
using AtomicWriteHook = std::function<void(const std::string& temp, const std::string& target)>;

/// Installs `hook` for the writes of this thread while it lives (the previous one after).
class ScopedAtomicWriteHook {
 public:
  explicit ScopedAtomicWriteHook(AtomicWriteHook hook);
  ~ScopedAtomicWriteHook();
  ScopedAtomicWriteHook(const ScopedAtomicWriteHook&) = delete;
  ScopedAtomicWriteHook& operator=(const ScopedAtomicWriteHook&) = delete;

 private:
  AtomicWriteHook previous_;
};

}  // namespace mixp::io::detail
