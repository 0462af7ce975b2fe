#include "mixp/memory.h"

#include <algorithm>
#include <cstdio>
#include <mutex>

#include "tensor/block_cache.h"

namespace mixp {

const char* name_of(MemoryTag tag) {
  switch (tag) {
    case MemoryTag::parameter: return "parameter";
    case MemoryTag::master: return "master";
    case MemoryTag::gradient: return "gradient";
    case MemoryTag::activation: return "activation";
    case MemoryTag::optimizer_state: return "optimizer_state";
    case MemoryTag::workspace: return "workspace";
    case MemoryTag::data: return "data";
  }
  return "unknown";
}

namespace memory {
namespace {

// One lock over all the counters, so that a snapshot (and the composition of the total at its
// peak) is exact however many threads allocate. A step allocates a few thousand tensors; an
// uncontended lock costs tens of nanoseconds each.
struct Counters {
  std::mutex lock;
  Stats s;
};

Counters& counters() {
  static Counters c;
  return c;
}

void add(Stats& s, MemoryTag tag, DType dtype, int64_t bytes) {
  const size_t t = size_t(tag), d = size_t(dtype);
  s.current_by_tag[t] += bytes;
  s.peak_by_tag[t] = std::max(s.peak_by_tag[t], s.current_by_tag[t]);
  s.current_by_dtype[d] += bytes;
  s.peak_by_dtype[d] = std::max(s.peak_by_dtype[d], s.current_by_dtype[d]);
  s.current_total += bytes;
  if (s.current_total > s.peak_total) {
    s.peak_total = s.current_total;
    s.at_peak_by_tag = s.current_by_tag;
  }
}

}  // namespace

void record_allocation(MemoryTag tag, DType dtype, int64_t bytes) {
  Counters& c = counters();
  const std::lock_guard<std::mutex> guard(c.lock);
  add(c.s, tag, dtype, bytes);
}

void record_release(MemoryTag tag, DType dtype, int64_t bytes) {
  Counters& c = counters();
  const std::lock_guard<std::mutex> guard(c.lock);
  add(c.s, tag, dtype, -bytes);
}

Stats stats() {
  Counters& c = counters();
  const std::lock_guard<std::mutex> guard(c.lock);
  return c.s;
}

void reset_peaks() {
  Counters& c = counters();
  const std::lock_guard<std::mutex> guard(c.lock);
  c.s.peak_by_tag = c.s.current_by_tag;
  c.s.peak_by_dtype = c.s.current_by_dtype;
  c.s.peak_total = c.s.current_total;
  c.s.at_peak_by_tag = c.s.current_by_tag;
}

std::string report(const Stats& s) {
  std::string out;
  char line[128];
  auto mib = [](int64_t bytes) { return double(bytes) / (1024.0 * 1024.0); };
  std::snprintf(line, sizeof line, "%-16s %12s %12s %18s\n", "memory", "current MiB", "peak MiB",
                "at total peak MiB");
  out += line;
  for (int i = 0; i < kMemoryTagCount; ++i) {
    if (s.peak_by_tag[size_t(i)] == 0) continue;
    std::snprintf(line, sizeof line, "%-16s %12.2f %12.2f %18.2f\n", name_of(MemoryTag(i)),
                  mib(s.current_by_tag[size_t(i)]), mib(s.peak_by_tag[size_t(i)]),
                  mib(s.at_peak_by_tag[size_t(i)]));
    out += line;
  }
  for (int i = 0; i < kDTypeCount; ++i) {
    if (s.peak_by_dtype[size_t(i)] == 0) continue;
    std::snprintf(line, sizeof line, "%-16s %12.2f %12.2f\n",
                  (std::string("dtype ") + name_of(DType(i))).c_str(),
                  mib(s.current_by_dtype[size_t(i)]), mib(s.peak_by_dtype[size_t(i)]));
    out += line;
  }
  std::snprintf(line, sizeof line, "%-16s %12.2f %12.2f %18.2f\n", "total", mib(s.current_total),
                mib(s.peak_total), mib(s.peak_total));
  out += line;
  return out;
}

size_t cached_bytes() { return detail::cached_bytes(); }
void release_cached() { detail::release_cached_blocks(); }

}  // namespace memory
}  // namespace mixp
