// The median the benches report: of an odd count the middle value, of an even count the mean
// of the two middle ones. Private to bench/.
#pragma once

#include <algorithm>
#include <vector>

namespace mixp::bench {

inline double median_of(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  const size_t n = v.size();
  return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

}  // namespace mixp::bench
