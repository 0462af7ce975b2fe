// Rounding one value into every format, and a buffer into FP8 with a per-tensor scale.
#include <mixp/mixp.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <vector>

int main() {
  const float pi = 3.14159f;
  std::printf("bf16(%g) = %.9g\n", pi, float(mixp::bfloat16(pi)));
  std::printf("f16(%g) = %.9g\n", pi, float(mixp::float16(pi)));
  for (const mixp::Format& f : mixp::standard_formats()) {
    const float y =
        mixp::round_to_format(f, pi, mixp::Rounding::nearest_even, mixp::Overflow::saturate);
    std::printf("  %-9s %.9g\n", f.name().c_str(), y);
  }

  std::vector<float> x(1000);
  mixp::Philox rng({/*seed=*/1, /*stream=*/0, /*offset=*/0});
  for (float& v : x) v = rng.normal();
  float amax = 0;
  for (float v : x) amax = std::max(amax, std::fabs(v));
  const float scale = float(mixp::traits(mixp::DType::e4m3).max) / amax;
  std::vector<mixp::float8_e4m3> q(x.size());
  mixp::convert(x, q, scale, mixp::Overflow::saturate);
  std::vector<float> back(x.size());
  mixp::convert(std::span<const mixp::float8_e4m3>(q), back, 1.0f / scale);
  double worst = 0;
  for (size_t i = 0; i < x.size(); ++i) {
    if (std::fabs(x[i]) * scale >= 1.0f / 64) {  // normal range of E4M3: relative error 2^-4
      worst = std::max(worst, double(std::fabs(back[i] - x[i]) / std::fabs(x[i])));
    }
  }
  std::printf("e4m3 with scale %.4g: %zu values in %zu bytes, worst relative error %.4f\n",
              double(scale), q.size(), q.size() * sizeof(q[0]), worst);

  // The same round trip on tensors: the mean squared error of bf16 against fp32.
  const mixp::Tensor t = mixp::from_values(std::vector<double>(x.begin(), x.end()), {1000});
  const double mse = mixp::ops::mse_loss(t.to(mixp::DType::bf16).to(mixp::DType::f32), t).item();
  std::printf("bf16 round trip of the same values: mean squared error %.3g\n", mse);
  return worst <= 1.0 / 16 ? 0 : 1;
}
