#include "mixp/memory.h"

#include <atomic>
#include <cstdio>

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

struct Counter {
  std::atomic<int64_t> current{0};
  std::atomic<int64_t> peak{0};

  void add(int64_t bytes) {
    const int64_t now = current.fetch_add(bytes, std::memory_order_relaxed) + bytes;
    int64_t seen = peak.load(std::memory_order_relaxed);
    while (now > seen && !peak.compare_exchange_weak(seen, now, std::memory_order_relaxed)) {
    }
  }
  void sub(int64_t bytes) { current.fetch_sub(bytes, std::memory_order_relaxed); }
  void reset_peak() {
    peak.store(current.load(std::memory_order_relaxed), std::memory_order_relaxed);
  }
};

struct Counters {
  Counter by_tag[kMemoryTagCount];
  Counter by_dtype[kDTypeCount];
  Counter total;
};

Counters& counters() {
  static Counters c;
  return c;
}

}  // namespace

void record_allocation(MemoryTag tag, DType dtype, int64_t bytes) {
  Counters& c = counters();
  c.by_tag[size_t(tag)].add(bytes);
  c.by_dtype[size_t(dtype)].add(bytes);
  c.total.add(bytes);
}

void record_release(MemoryTag tag, DType dtype, int64_t bytes) {
  Counters& c = counters();
  c.by_tag[size_t(tag)].sub(bytes);
  c.by_dtype[size_t(dtype)].sub(bytes);
  c.total.sub(bytes);
}

Stats stats() {
  Counters& c = counters();
  Stats s;
  for (size_t i = 0; i < size_t(kMemoryTagCount); ++i) {
    s.current_by_tag[i] = c.by_tag[i].current.load(std::memory_order_relaxed);
    s.peak_by_tag[i] = c.by_tag[i].peak.load(std::memory_order_relaxed);
  }
  for (size_t i = 0; i < size_t(kDTypeCount); ++i) {
    s.current_by_dtype[i] = c.by_dtype[i].current.load(std::memory_order_relaxed);
    s.peak_by_dtype[i] = c.by_dtype[i].peak.load(std::memory_order_relaxed);
  }
  s.current_total = c.total.current.load(std::memory_order_relaxed);
  s.peak_total = c.total.peak.load(std::memory_order_relaxed);
  return s;
}

void reset_peaks() {
  Counters& c = counters();
  for (Counter& k : c.by_tag) k.reset_peak();
  for (Counter& k : c.by_dtype) k.reset_peak();
  c.total.reset_peak();
}

std::string report(const Stats& s) {
  std::string out;
  char line[128];
  auto mib = [](int64_t bytes) { return double(bytes) / (1024.0 * 1024.0); };
  std::snprintf(line, sizeof line, "%-16s %12s %12s\n", "memory", "current MiB", "peak MiB");
  out += line;
  for (int i = 0; i < kMemoryTagCount; ++i) {
    if (s.peak_by_tag[size_t(i)] == 0) continue;
    std::snprintf(line, sizeof line, "%-16s %12.2f %12.2f\n", name_of(MemoryTag(i)),
                  mib(s.current_by_tag[size_t(i)]), mib(s.peak_by_tag[size_t(i)]));
    out += line;
  }
  for (int i = 0; i < kDTypeCount; ++i) {
    if (s.peak_by_dtype[size_t(i)] == 0) continue;
    std::snprintf(line, sizeof line, "%-16s %12.2f %12.2f\n",
                  (std::string("dtype ") + name_of(DType(i))).c_str(),
                  mib(s.current_by_dtype[size_t(i)]), mib(s.peak_by_dtype[size_t(i)]));
    out += line;
  }
  std::snprintf(line, sizeof line, "%-16s %12.2f %12.2f\n", "total", mib(s.current_total),
                mib(s.peak_total));
  out += line;
  return out;
}

size_t cached_bytes() { return detail::cached_bytes(); }
void release_cached() { detail::release_cached_blocks(); }

}  // namespace memory
}  // namespace mixp
