#include <gtest/gtest.h>

#include <cmath>
#include <sstream>

#include "mixp/error.h"
#include "mixp/memory.h"
#include "mixp/ops.h"
#include "mixp/tensor.h"

namespace mixp {
namespace {

TEST(Tensor, CreationShapesAndValues) {
  const Tensor z = zeros({2, 3});
  EXPECT_EQ(z.shape(), (Shape{2, 3}));
  EXPECT_EQ(z.numel(), 6);
  EXPECT_EQ(z.dtype(), DType::f32);
  EXPECT_EQ(z.to_vector(), std::vector<double>(6, 0.0));
  EXPECT_EQ(full({2}, 2.5, DType::bf16).to_vector(), (std::vector<double>{2.5, 2.5}));
  EXPECT_EQ(arange(4, DType::i64).to_vector(), (std::vector<double>{0, 1, 2, 3}));
  EXPECT_EQ(full({}, 7.0).item(), 7.0);
  EXPECT_EQ(ones({3}, DType::f16).size(-1), 3);
  EXPECT_THROW(zeros({2, 3}).item(), Error);
  EXPECT_THROW(from_values({1, 2, 3}, {2, 2}), Error);
  EXPECT_THROW(Shape({2, -1}), Error);
}

TEST(Tensor, FromBufferCopiesTheStoredBits) {
  const bfloat16 raw[3] = {bfloat16(1.5f), bfloat16(-2.0f), bfloat16::from_bits(0x7f80)};
  const Tensor t = from_buffer(raw, {3}, DType::bf16);
  EXPECT_EQ(t.data<bfloat16>()[2].bits, 0x7f80);
  EXPECT_EQ(t.to_vector()[0], 1.5);
  EXPECT_EQ(t.to_vector()[1], -2.0);
  EXPECT_THROW(from_buffer(nullptr, {2}, DType::f32), Error);
}

TEST(Tensor, LowPrecisionTensorsTakeTheirBytes) {
  memory::reset_peaks();
  const int64_t before = memory::stats().current(DType::bf16);
  const int64_t activations = memory::stats().current(MemoryTag::activation);
  {
    const Tensor b = zeros({1000}, DType::bf16);
    EXPECT_EQ(b.nbytes(), 2000u);
    EXPECT_EQ(memory::stats().current(DType::bf16) - before, 2000);
    EXPECT_EQ(memory::stats().current(MemoryTag::activation) - activations, 2000);
    const Tensor q = zeros({1000}, DType::e4m3, MemoryTag::parameter);
    EXPECT_EQ(q.nbytes(), 1000u);
    EXPECT_GE(memory::stats().current(MemoryTag::parameter), 1000);
  }
  EXPECT_EQ(memory::stats().current(DType::bf16), before);
  EXPECT_GE(memory::stats().peak(DType::bf16) - before, 2000);
  EXPECT_NE(memory::report(memory::stats()).find("activation"), std::string::npos);
}

TEST(Tensor, TheTotalsPeakIsBrokenDownByTag) {
  memory::reset_peaks();
  const memory::Stats before = memory::stats();
  {
    const Tensor weights = zeros({1000}, DType::f32, MemoryTag::parameter);
    const Tensor a = zeros({3000}, DType::bf16);  // the total peaks while both are alive
  }
  // A larger workspace later peaks on its own but not above the total: it does not appear.
  { const Tensor w = zeros({1000}, DType::u8, MemoryTag::workspace); }
  const memory::Stats s = memory::stats();
  EXPECT_EQ(s.peak_total - before.current_total, 4000 + 6000);
  EXPECT_EQ(s.at_peak(MemoryTag::parameter) - before.current(MemoryTag::parameter), 4000);
  EXPECT_EQ(s.at_peak(MemoryTag::activation) - before.current(MemoryTag::activation), 6000);
  EXPECT_EQ(s.at_peak(MemoryTag::workspace), before.current(MemoryTag::workspace));
  EXPECT_EQ(s.peak(MemoryTag::workspace) - before.current(MemoryTag::workspace), 1000);
  int64_t sum = 0;
  for (int64_t bytes : s.at_peak_by_tag) sum += bytes;
  EXPECT_EQ(sum, s.peak_total);
}

TEST(Tensor, ViewsShareStorage) {
  Tensor t = arange(12);
  Tensor v = t.reshape({3, -1});
  EXPECT_EQ(v.shape(), (Shape{3, 4}));
  Tensor rows = v.slice(1, 3);
  EXPECT_EQ(rows.shape(), (Shape{2, 4}));
  EXPECT_EQ(rows.to_vector()[0], 4.0);
  rows.fill_(-1.0);
  EXPECT_EQ(t.to_vector()[4], -1.0);  // the same memory
  EXPECT_EQ(t.to_vector()[3], 3.0);
  EXPECT_THROW(t.reshape({5, -1}), Error);
  EXPECT_THROW(v.slice(2, 5), Error);
  Tensor c = t.clone();
  c.fill_(0.0);
  EXPECT_EQ(t.to_vector()[0], 0.0);  // arange's first element is 0 anyway
  EXPECT_EQ(t.to_vector()[5], -1.0);
}

TEST(Tensor, ConversionRoundsToNearestEvenOnce) {
  const Tensor x = from_values({1.0 + 0x1p-9, 3.14159, 1e-40, 70000.0}, {4});
  const Tensor b = x.to(DType::bf16);
  const std::vector<double> v = b.to_vector();
  EXPECT_EQ(v[0], double(float(bfloat16(float(1.0 + 0x1p-9)))));
  EXPECT_EQ(v[1], double(float(bfloat16(3.14159f))));
  EXPECT_EQ(v[2], double(float(bfloat16(1e-40f))));  // a subnormal, kept
  EXPECT_TRUE(std::isinf(x.to(DType::f16).to_vector()[3]));
  // From f64, rounding is done once: 1 + 2^-8 + 2^-30 lies above the bf16 midpoint 1 + 2^-8,
  // which a double -> fp32 -> bf16 chain would hit exactly and round down to 1.
  const Tensor d = from_values({1.0 + 0x1p-8 + 0x1p-30}, {1}, DType::f64);
  EXPECT_EQ(d.to(DType::bf16).item(), 1.0 + 0x1p-7);
}

TEST(Tensor, StochasticConversionIsReproducibleAndAdvancesTheGenerator) {
  Philox a(PhiloxState{1, 2, 0}), b(PhiloxState{1, 2, 0});
  const Tensor x = full({100}, 1.0 + 0x1p-10);
  const Tensor ra = x.to(DType::bf16, a), rb = x.to(DType::bf16, b);
  EXPECT_EQ(ra.to_vector(), rb.to_vector());
  EXPECT_EQ(a.state().offset, 100u);
  int ups = 0;
  for (double v : ra.to_vector()) {
    EXPECT_TRUE(v == 1.0 || v == 1.0 + 0x1p-7);
    ups += v > 1.0;
  }
  EXPECT_GT(ups, 0);
  EXPECT_LT(ups, 100);
  EXPECT_THROW(x.to(DType::e4m3, a), Error);
}

TEST(Tensor, PrintingShowsShapeDtypeAndValues) {
  std::ostringstream s;
  s << from_values({1.5, -2}, {2}, DType::bf16);
  EXPECT_EQ(s.str(), "tensor([2], bf16) [1.5, -2]");
  EXPECT_NE(arange(100).to_string().find("(88 more)"), std::string::npos);
}

TEST(Tensor, DataIsCheckedAgainstTheDtype) {
  Tensor t = zeros({2}, DType::bf16);
  EXPECT_NO_THROW(t.data<bfloat16>());
  EXPECT_THROW(t.data<float>(), Error);
  EXPECT_THROW(Tensor().shape(), Error);
}

TEST(Tensor, MismatchesNameTheOpShapesAndDtypes) {
  try {
    ops::add(zeros({2, 3}), zeros({4}));
    FAIL();
  } catch (const Error& e) {
    EXPECT_NE(e.message().find("add"), std::string::npos);
    EXPECT_NE(e.message().find("[2, 3]"), std::string::npos);
    EXPECT_NE(e.message().find("[4]"), std::string::npos);
  }
  try {
    ops::mul(zeros({2}), zeros({2}, DType::bf16));
    FAIL();
  } catch (const Error& e) {
    EXPECT_NE(e.message().find("f32"), std::string::npos);
    EXPECT_NE(e.message().find("bf16"), std::string::npos);
  }
  EXPECT_THROW(ops::matmul(zeros({2, 3}), zeros({4, 5})), Error);
  EXPECT_THROW(ops::exp(zeros({2}, DType::i32)), Error);
  EXPECT_THROW(ops::cross_entropy(zeros({2, 3}), from_values({0, 3}, {2}, DType::i64)), Error);
  EXPECT_THROW(ops::sum(zeros({2, 3}), {2}), Error);
  EXPECT_THROW(ops::permute(zeros({2, 3}), {0, 0}), Error);
}

}  // namespace
}  // namespace mixp
