#include "mixp/amp/grad_scaler.h"

#include <gtest/gtest.h>
#include <omp.h>

#include <bit>
#include <cmath>
#include <cstring>
#include <fstream>
#include <limits>
#include <sstream>

#include "mixp/error.h"
#include "mixp/ops.h"
#include "support/vectors.h"

namespace mixp::amp {
namespace {

constexpr float kInf = std::numeric_limits<float>::infinity();
constexpr float kNaN = std::numeric_limits<float>::quiet_NaN();

uint32_t bits(float x) { return std::bit_cast<uint32_t>(x); }

// p -= lr * grad, in fp32, for f32 parameters: the real optimizers live elsewhere.
class TestSgd : public optim::Optimizer {
 public:
  explicit TestSgd(std::vector<Tensor> parameters, double lr = 0.5)
      : Optimizer(std::move(parameters)) {
    set_learning_rate(lr);
  }
  void step() override {
    for (Tensor& p : parameters_) {
      const Tensor g = p.grad();
      if (!g.defined()) continue;
      const Tensor g32 = g.dtype() == DType::f32 ? g : g.detach().to(DType::f32);
      float* w = p.data<float>();
      const float* d = g32.data<float>();
      for (int64_t i = 0; i < p.numel(); ++i) w[i] -= float(learning_rate_) * d[i];
    }
    ++steps_;
  }
};

Tensor parameter(const Shape& shape, double value = 1.0) {
  return full(shape, value).set_requires_grad(true);
}

std::vector<uint8_t> bytes_of(const Tensor& t) {
  const auto* p = static_cast<const uint8_t*>(t.raw_data());
  return {p, p + t.nbytes()};
}

// ---- the trace files --------------------------------------------------------------------

struct TraceLine {
  bool found_inf = false;
  uint32_t scale_before = 0;
  bool applied = false;
};

struct Trace {
  std::string name;
  GradScalerOptions options;
  std::vector<TraceLine> lines;
};

std::string traces_dir() { return test::vectors_dir() + "/traces"; }

std::vector<std::string> trace_names() {
  return {"scaler_default_clean.txt", "scaler_default_mixed.txt",     "scaler_gi5_bursts_10000.txt",
          "scaler_gi1_cap.txt",       "scaler_underflow_to_zero.txt", "scaler_nonpow2_factors.txt"};
}

double param_value(const std::string& params, const std::string& key) {
  const size_t at = params.find(key + "=");
  EXPECT_NE(at, std::string::npos) << "no " << key << " in '" << params << "'";
  if (at == std::string::npos) return 0.0;
  return std::stod(params.substr(at + key.size() + 1));
}

Trace read_trace(const std::string& name) {
  Trace trace;
  trace.name = name;
  const std::string path = traces_dir() + "/" + name;
  std::ifstream in(path);
  EXPECT_TRUE(in.good()) << "cannot open " << path;
  std::string line;
  size_t declared = 0;
  uint32_t init_hex = 0;
  while (std::getline(in, line)) {
    if (line.empty()) continue;
    if (line[0] == '#') {
      if (line.starts_with("# params: ")) {
        const std::string p = line.substr(10);
        trace.options.init_scale = param_value(p, "init_scale");
        trace.options.growth_factor = param_value(p, "growth_factor");
        trace.options.backoff_factor = param_value(p, "backoff_factor");
        trace.options.growth_interval = int64_t(param_value(p, "growth_interval"));
        const size_t at = p.find("init_scale_hex=");
        if (at != std::string::npos)
          init_hex = uint32_t(std::stoul(p.substr(at + 15), nullptr, 16));
      }
      if (line.starts_with("# steps: ")) declared = std::stoul(line.substr(9));
      continue;
    }
    std::istringstream fields(line);
    int64_t step = 0;
    int found = 0, applied = 0;
    std::string before;
    fields >> step >> found >> before >> applied;
    EXPECT_FALSE(fields.fail()) << path << ": '" << line << "'";
    EXPECT_EQ(step, int64_t(trace.lines.size())) << path;
    trace.lines.push_back({found == 1, uint32_t(std::stoul(before, nullptr, 16)), applied == 1});
  }
  EXPECT_EQ(trace.lines.size(), declared) << path;
  EXPECT_EQ(bits(float(trace.options.init_scale)), init_hex) << path;
  return trace;
}

TEST(GradScalerTraces, EveryTraceMatchesTheUpdateRule) {
  for (const std::string& name : trace_names()) {
    const Trace trace = read_trace(name);
    ASSERT_FALSE(trace.lines.empty()) << name;
    trace.options.validate();
    ScaleState state;
    state.scale = float(trace.options.init_scale);
    size_t mismatches = 0;
    for (size_t i = 0; i < trace.lines.size(); ++i) {
      const TraceLine& l = trace.lines[i];
      if (bits(state.scale) != l.scale_before || l.applied == l.found_inf) {
        if (mismatches++ < 5) {
          ADD_FAILURE() << name << " step " << i << ": scale " << std::hex << bits(state.scale)
                        << ", expected " << l.scale_before;
        }
      }
      update_scale(state, trace.options, l.found_inf);
    }
    EXPECT_EQ(mismatches, 0u) << name;
  }
}

TEST(GradScalerTraces, EveryTraceMatchesAGradScalerDrivingAnOptimizer) {
  // The whole path: a gradient holding inf on the found_inf steps, unscale, step, update.
  for (const std::string& name : trace_names()) {
    const Trace trace = read_trace(name);
    GradScaler scaler(trace.options);
    int warnings = 0;
    scaler.set_warning_handler([&](const std::string&) { ++warnings; });
    Tensor w = parameter({3});
    TestSgd opt({w}, 0.0);
    size_t mismatches = 0;
    for (size_t i = 0; i < trace.lines.size(); ++i) {
      const TraceLine& l = trace.lines[i];
      w.set_grad(l.found_inf ? from_values({1.0, kInf, 1.0}, {3}) : ones({3}));
      const float before = scaler.get_scale();
      const int64_t steps_before = opt.steps();
      const bool applied = scaler.step(opt);
      scaler.update();
      if (bits(before) != l.scale_before || applied != l.applied ||
          (opt.steps() - steps_before == 1) != l.applied) {
        if (mismatches++ < 5) ADD_FAILURE() << name << " step " << i;
      }
    }
    EXPECT_EQ(mismatches, 0u) << name;
    EXPECT_EQ(scaler.steps(), int64_t(trace.lines.size()));
    // Only the trace whose scale falls to 0 warns, once.
    EXPECT_EQ(warnings, name == "scaler_underflow_to_zero.txt" ? 1 : 0) << name;
  }
}

// ---- scale and unscale ------------------------------------------------------------------

TEST(GradScaler, DefaultsArePyTorchs) {
  GradScaler scaler;
  EXPECT_EQ(scaler.get_scale(), 65536.0f);
  EXPECT_EQ(scaler.options().growth_factor, 2.0);
  EXPECT_EQ(scaler.options().backoff_factor, 0.5);
  EXPECT_EQ(scaler.options().growth_interval, 2000);
  EXPECT_TRUE(scaler.is_enabled());
  EXPECT_EQ(scaler.growth_tracker(), 0);
}

TEST(GradScaler, ScaleMultipliesTheLossInFp32AndIsDifferentiable) {
  GradScaler scaler(GradScalerOptions{.init_scale = 1024.0});
  Tensor w = full({4}, 1.0, DType::bf16).set_requires_grad(true);
  Tensor loss = ops::sum(ops::mul_scalar(w, 0.25));  // bf16 scalar, 1.0
  const Tensor scaled = scaler.scale(loss);
  ASSERT_EQ(scaled.dtype(), DType::f32);
  EXPECT_EQ(scaled.shape(), loss.shape());
  EXPECT_EQ(scaled.item(), 1024.0);
  scaled.backward();
  ASSERT_TRUE(w.grad().defined());
  for (double g : w.grad().to_vector()) EXPECT_EQ(g, 256.0);

  const Tensor f64_loss = full({}, 3.0, DType::f64);
  EXPECT_EQ(scaler.scale(f64_loss).dtype(), DType::f64);
  EXPECT_THROW(scaler.scale(Tensor()), Error);
}

// The expected result of unscaling `g` (values of `dtype`): each multiplied by the fp32 inverse
// in fp32 (in double for f64), then rounded once back to the dtype.
std::vector<double> unscaled_values(const std::vector<double>& g, float inv, DType dtype) {
  std::vector<double> products;
  for (double x : g) {
    products.push_back(dtype == DType::f64 ? x * double(inv) : double(float(x) * inv));
  }
  return from_values(products, {int64_t(g.size())}, dtype).to_vector();
}

class UnscaleByDtype : public ::testing::TestWithParam<DType> {};

TEST_P(UnscaleByDtype, DividesByTheScaleInFp32AndFindsInfAndNaN) {
  const DType dtype = GetParam();
  for (double init : {65536.0, 1000.0}) {     // a power of two, and a scale with an inexact inverse
    for (int64_t n : {1, 7, 1025, 200003}) {  // 200003 spans several parallel chunks
      for (int inject = 0; inject < 3; ++inject) {  // none, +inf, NaN
        GradScaler scaler(GradScalerOptions{.init_scale = init});
        const float inv = float(1.0 / double(float(init)));
        Tensor w = parameter({n}, 0.0);  // an fp32 master whose gradient has `dtype`
        Philox rng({/*seed=*/uint64_t(n)});
        Tensor g = randn({n}, rng, 300.0, dtype);
        const int64_t bad_at = n / 2;
        if (inject > 0) {
          std::vector<double> v = g.to_vector();
          v[size_t(bad_at)] = inject == 1 ? double(kInf) : double(kNaN);
          g = from_values(v, {n}, dtype);
        }
        const std::vector<double> before = g.to_vector();
        Tensor other = parameter({2, 3});
        other.set_grad(ones({2, 3}));
        w.set_grad(g);
        TestSgd opt({other, w});
        scaler.unscale(opt);
        ASSERT_EQ(w.grad().dtype(), dtype);
        EXPECT_EQ(scaler.found_inf(opt), inject > 0) << n;
        const std::vector<double> after = w.grad().to_vector();
        const std::vector<double> want = unscaled_values(before, inv, dtype);
        size_t wrong = 0;
        for (int64_t i = 0; i < n; ++i) {
          const double got = after[size_t(i)];
          if (inject > 0 && i == bad_at) {
            EXPECT_TRUE(inject == 1 ? std::isinf(got) : std::isnan(got));
            continue;
          }
          if (std::bit_cast<uint64_t>(want[size_t(i)]) != std::bit_cast<uint64_t>(got)) ++wrong;
        }
        EXPECT_EQ(wrong, 0u) << name_of(dtype) << " n=" << n << " scale " << init;
        for (double v : other.grad().to_vector()) EXPECT_EQ(v, double(inv));
        // The log names where the first inf/NaN was.
        scaler.step(opt);
        scaler.update();
        if (inject > 0) {
          ASSERT_EQ(scaler.scale_log().size(), 1u);
          const ScaleChangeRecord& r = scaler.scale_log()[0];
          ASSERT_TRUE(r.first_non_finite.has_value());
          EXPECT_EQ(r.first_non_finite->parameter, 1u);
          EXPECT_EQ(r.first_non_finite->element, bad_at);
          EXPECT_EQ(r.first_non_finite->shape, Shape({n}));
        } else {
          EXPECT_TRUE(scaler.scale_log().empty());
        }
      }
    }
  }
}

INSTANTIATE_TEST_SUITE_P(Dtypes, UnscaleByDtype,
                         ::testing::Values(DType::f32, DType::bf16, DType::f16, DType::f64),
                         [](const auto& info) { return std::string(name_of(info.param)); });

TEST(GradScaler, UnscaleFindsTheFirstBadElementWhateverTheThreadCount) {
  const int64_t n = 300000;
  std::vector<double> v(size_t(n), 2.0);
  v[70001] = double(kNaN);
  v[250000] = double(kInf);
  std::vector<std::vector<uint8_t>> results;
  for (int threads : {1, 3, 8}) {
    const int saved = omp_get_max_threads();
    omp_set_num_threads(threads);
    GradScaler scaler(GradScalerOptions{.init_scale = 3.0});
    Tensor w = parameter({n});
    w.set_grad(from_values(v, {n}));
    TestSgd opt({w});
    scaler.step(opt);
    scaler.update();
    omp_set_num_threads(saved);
    ASSERT_EQ(scaler.scale_log().size(), 1u);
    EXPECT_EQ(scaler.scale_log()[0].first_non_finite->element, 70001);
    results.push_back(bytes_of(w.grad()));
  }
  EXPECT_EQ(results[0], results[1]);
  EXPECT_EQ(results[0], results[2]);
}

TEST(GradScaler, FP8GradientsAreUnscaledToo) {
  GradScaler scaler(GradScalerOptions{.init_scale = 4.0});
  Tensor w = parameter({3});
  w.set_grad(from_values({8.0, -2.0, 448.0}, {3}, DType::e4m3));
  TestSgd opt({w});
  scaler.unscale(opt);
  EXPECT_EQ(w.grad().to_vector(), (std::vector<double>{2.0, -0.5, 112.0}));
  EXPECT_FALSE(scaler.found_inf(opt));
}

TEST(GradScaler, ASkippedStepLeavesEveryParameterBitIdentical) {
  GradScaler scaler;
  Philox rng({7});
  Tensor a = randn({4, 5}, rng).set_requires_grad(true);
  Tensor b = randn({3}, rng).set_requires_grad(true);
  Tensor c = randn({2}, rng).set_requires_grad(true);  // no gradient at all
  a.set_grad(randn({4, 5}, rng, 1000.0));
  b.set_grad(from_values({1.0, kNaN, 2.0}, {3}));
  TestSgd opt({a, b, c});
  const auto a0 = bytes_of(a), b0 = bytes_of(b), c0 = bytes_of(c);
  EXPECT_FALSE(scaler.step(opt));
  EXPECT_EQ(opt.steps(), 0);
  EXPECT_EQ(bytes_of(a), a0);
  EXPECT_EQ(bytes_of(b), b0);
  EXPECT_EQ(bytes_of(c), c0);
  scaler.update();
  EXPECT_EQ(scaler.get_scale(), 32768.0f);

  // The next, clean step is applied.
  a.set_grad(full({4, 5}, 32768.0));
  b.set_grad(full({3}, 32768.0));
  EXPECT_TRUE(scaler.step(opt));
  EXPECT_EQ(opt.steps(), 1);
  EXPECT_NE(bytes_of(a), a0);
  EXPECT_EQ(bytes_of(c), c0);
}

TEST(GradScaler, MisuseIsRefused) {
  GradScaler scaler;
  Tensor w = parameter({2});
  w.set_grad(ones({2}));
  TestSgd opt({w});
  EXPECT_THROW(scaler.update(), Error);  // nothing unscaled or stepped yet
  scaler.unscale(opt);
  try {
    scaler.unscale(opt);
    ADD_FAILURE() << "a second unscale was accepted";
  } catch (const Error& e) {
    EXPECT_NE(e.message().find("already"), std::string::npos) << e.message();
  }
  // The gradient was divided once only.
  EXPECT_EQ(w.grad().to_vector(), (std::vector<double>{1.0 / 65536, 1.0 / 65536}));
  EXPECT_TRUE(scaler.step(opt));  // uses the unscale above
  EXPECT_THROW(scaler.step(opt), Error);
  EXPECT_THROW(scaler.unscale(opt), Error);  // after step()
  scaler.update();
  EXPECT_TRUE(scaler.step(opt));  // a new step
  scaler.update();
  EXPECT_THROW(GradScaler(GradScalerOptions{.growth_factor = 1.0}), Error);
  EXPECT_THROW(GradScaler(GradScalerOptions{.backoff_factor = 1.0}), Error);
  EXPECT_THROW(GradScaler(GradScalerOptions{.growth_interval = 0}), Error);
  EXPECT_THROW(GradScaler(GradScalerOptions{.init_scale = 0.0}), Error);
  EXPECT_THROW(GradScaler(GradScalerOptions{.init_scale = 1e39}), Error);  // inf in fp32
  EXPECT_THROW(GradScaler(GradScalerOptions{.hysteresis = 0}), Error);
  EXPECT_THROW(GradScaler(GradScalerOptions{.init_scale = 8.0, .min_scale = 16.0}), Error);
  EXPECT_THROW(scaler.update(0.0), Error);
}

TEST(GradScaler, SeveralOptimizersEachSkipOnTheirOwnAndUpdateSeesAll) {
  GradScaler scaler;
  Tensor a = parameter({2}), b = parameter({2, 2});
  TestSgd first({a}), second({b});
  a.set_grad(full({2}, 65536.0));
  b.set_grad(from_values({0.0, 0.0, kInf, 0.0}, {2, 2}));
  EXPECT_TRUE(scaler.step(first));
  EXPECT_FALSE(scaler.step(second));
  EXPECT_EQ(a.to_vector(), (std::vector<double>{0.5, 0.5}));
  EXPECT_EQ(b.to_vector(), (std::vector<double>{1, 1, 1, 1}));
  scaler.update();
  EXPECT_EQ(scaler.get_scale(), 32768.0f);
  ASSERT_EQ(scaler.scale_log().size(), 1u);
  const ScaleChangeRecord& r = scaler.scale_log()[0];
  ASSERT_TRUE(r.first_non_finite.has_value());
  EXPECT_EQ(r.first_non_finite->optimizer, 1u);
  EXPECT_EQ(r.first_non_finite->parameter, 0u);
  EXPECT_EQ(r.first_non_finite->shape, Shape({2, 2}));
  EXPECT_EQ(r.first_non_finite->element, 2);
}

TEST(GradScaler, GradientAccumulationScalesEveryMicroBatchAndUnscalesOnce) {
  // sum over micro-batches k of sum(w * x_k): the gradient is sum_k x_k.
  Philox rng({3});
  std::vector<Tensor> xs;
  for (int k = 0; k < 4; ++k) xs.push_back(randn({6}, rng));
  auto accumulate = [&](GradScaler* scaler, Tensor& w) {
    for (const Tensor& x : xs) {
      Tensor loss = ops::sum(ops::mul(w, x));
      (scaler ? scaler->scale(loss) : loss).backward();
    }
  };
  Tensor reference = parameter({6});
  accumulate(nullptr, reference);

  GradScaler scaler;  // 2^16: scaling and unscaling are exact
  Tensor w = parameter({6});
  accumulate(&scaler, w);
  TestSgd opt({w});
  EXPECT_NE(bytes_of(w.grad()), bytes_of(reference.grad()));  // still scaled
  scaler.unscale(opt);
  EXPECT_EQ(bytes_of(w.grad()), bytes_of(reference.grad()));
  EXPECT_TRUE(scaler.step(opt));
  scaler.update();
  EXPECT_EQ(scaler.growth_tracker(), 1);
}

TEST(GradScaler, DisabledScalerDoesNothingButStep) {
  GradScaler scaler(GradScalerOptions{.enabled = false});
  Tensor w = parameter({2});
  w.set_grad(from_values({kInf, 1.0}, {2}));
  TestSgd opt({w});
  const Tensor loss = full({}, 3.0);
  EXPECT_TRUE(scaler.scale(loss).is_same(loss));
  scaler.unscale(opt);
  EXPECT_TRUE(scaler.step(opt));
  EXPECT_EQ(opt.steps(), 1);
  scaler.update();
  EXPECT_EQ(scaler.get_scale(), 1.0f);
  EXPECT_TRUE(scaler.state().empty());
}

// ---- beyond PyTorch -----------------------------------------------------------------------

// Runs one step with the given found_inf; returns whether it was applied.
bool run_step(GradScaler& scaler, bool found_inf) {
  Tensor w = parameter({2});
  w.set_grad(found_inf ? from_values({kNaN, 1.0}, {2}) : ones({2}));
  TestSgd opt({w});
  const bool applied = scaler.step(opt);
  scaler.update();
  return applied;
}

TEST(GradScaler, HysteresisBacksOffOnlyAfterNOverflowsInARow) {
  GradScaler scaler(GradScalerOptions{.init_scale = 1024.0, .growth_interval = 3, .hysteresis = 3});
  EXPECT_FALSE(run_step(scaler, true));
  EXPECT_FALSE(run_step(scaler, true));
  EXPECT_EQ(scaler.get_scale(), 1024.0f);  // two overflows: kept, both steps skipped
  EXPECT_FALSE(run_step(scaler, true));
  EXPECT_EQ(scaler.get_scale(), 512.0f);  // the third backs off
  EXPECT_FALSE(run_step(scaler, true));
  EXPECT_EQ(scaler.get_scale(), 256.0f);  // and every one after it in the run
  EXPECT_TRUE(run_step(scaler, false));   // a clean step restarts the count
  EXPECT_FALSE(run_step(scaler, true));
  EXPECT_FALSE(run_step(scaler, true));
  EXPECT_EQ(scaler.get_scale(), 256.0f);
  EXPECT_EQ(scaler.growth_tracker(), 0);  // delayed overflows still restart the interval
  for (int i = 0; i < 3; ++i) EXPECT_TRUE(run_step(scaler, false));
  EXPECT_EQ(scaler.get_scale(), 512.0f);
}

TEST(GradScaler, MinScaleStopsTheFallAndWarnsOnce) {
  GradScaler scaler(GradScalerOptions{.init_scale = 3000.0, .min_scale = 1000.0});
  std::vector<std::string> warnings;
  scaler.set_warning_handler([&](const std::string& m) { warnings.push_back(m); });
  run_step(scaler, true);
  EXPECT_EQ(scaler.get_scale(), 1500.0f);
  run_step(scaler, true);
  EXPECT_EQ(scaler.get_scale(), 1000.0f);  // clamped, not 750
  EXPECT_TRUE(warnings.empty());
  EXPECT_FALSE(run_step(scaler, true));
  EXPECT_FALSE(run_step(scaler, true));
  EXPECT_EQ(scaler.get_scale(), 1000.0f);
  ASSERT_EQ(warnings.size(), 1u);
  EXPECT_NE(warnings[0].find("step 2"), std::string::npos) << warnings[0];
  EXPECT_NE(warnings[0].find("min_scale"), std::string::npos) << warnings[0];
  ASSERT_EQ(scaler.scale_log().size(), 2u);
  EXPECT_EQ(scaler.scale_log()[1].reason, ScaleChange::backoff_to_min);
}

TEST(GradScaler, AtMinScaleCanThrowNamingTheStep) {
  GradScaler scaler(GradScalerOptions{
      .init_scale = 2000.0, .min_scale = 1000.0, .at_min_scale = AtMinScale::throw_error});
  run_step(scaler, true);
  EXPECT_EQ(scaler.get_scale(), 1000.0f);
  try {
    run_step(scaler, true);
    ADD_FAILURE() << "no error at min_scale";
  } catch (const Error& e) {
    EXPECT_NE(e.message().find("step 1"), std::string::npos) << e.message();
  }
  EXPECT_EQ(scaler.get_scale(), 1000.0f);
  EXPECT_EQ(scaler.steps(), 1);  // the failed update() changed nothing
}

TEST(GradScaler, ACollapseToZeroIsNeverSilent) {
  // PyTorch's rule, no min_scale: from the smallest subnormal one overflow gives 0.
  const double tiny = double(std::numeric_limits<float>::denorm_min());
  GradScaler warned(GradScalerOptions{.init_scale = tiny});
  std::vector<std::string> warnings;
  warned.set_warning_handler([&](const std::string& m) { warnings.push_back(m); });
  run_step(warned, true);
  EXPECT_EQ(warned.get_scale(), 0.0f);  // the numbers stay PyTorch's
  ASSERT_EQ(warnings.size(), 1u);
  EXPECT_NE(warnings[0].find("fallen to 0"), std::string::npos) << warnings[0];
  EXPECT_NE(warnings[0].find("step 0"), std::string::npos) << warnings[0];

  GradScaler strict(GradScalerOptions{.init_scale = tiny, .at_min_scale = AtMinScale::throw_error});
  EXPECT_THROW(run_step(strict, true), Error);
  EXPECT_EQ(strict.get_scale(), float(tiny));
}

TEST(GradScaler, MaxScaleCapsGrowth) {
  GradScaler scaler(
      GradScalerOptions{.init_scale = 4096.0, .growth_interval = 1, .max_scale = 10000.0});
  run_step(scaler, false);
  EXPECT_EQ(scaler.get_scale(), 8192.0f);
  run_step(scaler, false);
  EXPECT_EQ(scaler.get_scale(), 10000.0f);
  run_step(scaler, false);
  EXPECT_EQ(scaler.get_scale(), 10000.0f);
  ASSERT_EQ(scaler.scale_log().size(), 2u);
  EXPECT_EQ(scaler.scale_log()[1].reason, ScaleChange::growth_to_max);
  ScaleState s{10000.0f, 0, 0};
  EXPECT_EQ(update_scale(s, scaler.options(), false), ScaleChange::growth_refused);
}

TEST(GradScaler, StaticScalerKeepsItsScaleAndStillSkipsOverflows) {
  GradScaler scaler(GradScalerOptions{.init_scale = 128.0, .growth_interval = 1, .dynamic = false});
  EXPECT_FALSE(run_step(scaler, true));
  EXPECT_TRUE(run_step(scaler, false));
  EXPECT_TRUE(run_step(scaler, false));
  EXPECT_FALSE(run_step(scaler, true));
  EXPECT_EQ(scaler.get_scale(), 128.0f);
  EXPECT_TRUE(scaler.scale_log().empty());
}

TEST(GradScaler, TheLogRecordsEveryChange) {
  GradScaler scaler(GradScalerOptions{.init_scale = 256.0, .growth_interval = 2});
  run_step(scaler, false);  // step 0
  run_step(scaler, false);  // step 1: grows to 512
  run_step(scaler, true);   // step 2: backs off to 256
  run_step(scaler, false);  // step 3
  scaler.update(100.0);     // step 4: set by the user
  const std::vector<ScaleChangeRecord>& log = scaler.scale_log();
  ASSERT_EQ(log.size(), 3u);
  EXPECT_EQ(log[0].step, 1);
  EXPECT_EQ(log[0].old_scale, 256.0f);
  EXPECT_EQ(log[0].new_scale, 512.0f);
  EXPECT_EQ(log[0].reason, ScaleChange::growth);
  EXPECT_FALSE(log[0].first_non_finite.has_value());
  EXPECT_EQ(log[1].step, 2);
  EXPECT_EQ(log[1].new_scale, 256.0f);
  EXPECT_EQ(log[1].reason, ScaleChange::backoff);
  ASSERT_TRUE(log[1].first_non_finite.has_value());
  EXPECT_EQ(log[1].first_non_finite->element, 0);
  EXPECT_EQ(log[2].step, 4);
  EXPECT_EQ(log[2].new_scale, 100.0f);
  EXPECT_EQ(log[2].reason, ScaleChange::set_by_user);
  EXPECT_STREQ(name_of(log[2].reason), "set_by_user");
  EXPECT_EQ(scaler.growth_tracker(), 1);  // update(new_scale) keeps it
}

TEST(GradScaler, StateRoundTripsWithPyTorchsKeys) {
  const GradScalerOptions options{.init_scale = 1000.0,
                                  .growth_factor = 1.5,
                                  .backoff_factor = 0.75,
                                  .growth_interval = 3,
                                  .hysteresis = 2};
  GradScaler a(options);
  const bool flags[] = {false, true, false, false, false, true, true, false};
  for (bool f : flags) run_step(a, f);
  const std::map<std::string, double> state = a.state();
  for (const char* key :
       {"scale", "growth_factor", "backoff_factor", "growth_interval", "_growth_tracker"}) {
    EXPECT_TRUE(state.contains(key)) << key;
  }
  EXPECT_EQ(state.at("scale"), double(a.get_scale()));
  EXPECT_EQ(state.at("growth_factor"), 1.5);
  EXPECT_EQ(state.at("growth_interval"), 3.0);
  EXPECT_EQ(state.at("_growth_tracker"), double(a.growth_tracker()));

  GradScaler b(GradScalerOptions{.hysteresis = 2});  // other factors: the state brings them
  b.load_state(state);
  EXPECT_EQ(b.state(), state);
  const bool more[] = {true, false, false, false, true, true, false, false, false, false};
  for (bool f : more) {
    EXPECT_EQ(run_step(a, f), run_step(b, f));
    EXPECT_EQ(bits(a.get_scale()), bits(b.get_scale()));
  }
  EXPECT_EQ(a.state(), b.state());

  // A state with PyTorch's keys alone loads.
  std::map<std::string, double> torch_state = {{"scale", 2048.0},
                                               {"growth_factor", 2.0},
                                               {"backoff_factor", 0.5},
                                               {"growth_interval", 10},
                                               {"_growth_tracker", 4.0}};
  GradScaler c;
  c.load_state(torch_state);
  EXPECT_EQ(c.get_scale(), 2048.0f);
  EXPECT_EQ(c.growth_tracker(), 4);
  EXPECT_EQ(c.options().growth_interval, 10);

  // Bad states are refused and change nothing.
  GradScaler d;
  EXPECT_THROW(d.load_state({}), Error);
  auto missing = torch_state;
  missing.erase("_growth_tracker");
  EXPECT_THROW(d.load_state(missing), Error);
  auto bad_tracker = torch_state;
  bad_tracker["_growth_tracker"] = 10.0;
  EXPECT_THROW(d.load_state(bad_tracker), Error);
  auto bad_growth = torch_state;
  bad_growth["growth_factor"] = 0.5;
  EXPECT_THROW(d.load_state(bad_growth), Error);
  EXPECT_EQ(d.get_scale(), 65536.0f);
  EXPECT_EQ(d.options().growth_interval, 2000);
}

// ---- underflow-aware growth ----------------------------------------------------------------

// One step of a scaler over one parameter whose scaled gradient is `grad` (a value per element).
bool step_with(GradScaler& scaler, TestSgd& opt, Tensor& p, const std::vector<double>& grad) {
  p.set_grad(from_values(grad, p.shape()));
  const bool applied = scaler.step(opt);
  scaler.update();
  return applied;
}

TEST(GradScalerUnderflow, GrowsEveryCheckWhileTooManyGradientsWouldFlush) {
  Tensor p = parameter({4});
  TestSgd opt({p});
  GradScaler scaler({.init_scale = 1.0, .underflow_fraction = 0.5, .underflow_check_interval = 3});
  // Three of four elements at or below 2^-25 (the fp16 flush bound), so 75% > 50%.
  const std::vector<double> tiny = {0.0, 0x1p-25, 0x1p-30, 1e-3};
  std::vector<float> scales;
  for (int s = 0; s < 9; ++s) {
    scales.push_back(scaler.get_scale());
    step_with(scaler, opt, p, tiny);
  }
  // Checked on steps 0, 3 and 6: the scale doubles after each of them.
  EXPECT_EQ(scales, (std::vector<float>{1, 2, 2, 2, 4, 4, 4, 8, 8}));
  ASSERT_EQ(scaler.scale_log().size(), 3u);
  EXPECT_EQ(scaler.scale_log()[0].reason, ScaleChange::underflow_growth);
  EXPECT_EQ(scaler.scale_log()[2].step, 6);
  EXPECT_STREQ(name_of(ScaleChange::underflow_growth), "underflow_growth");

  // Half of them (not more) flushing: no growth.
  GradScaler half({.init_scale = 1.0, .underflow_fraction = 0.5});
  for (int s = 0; s < 4; ++s) step_with(half, opt, p, {0.0, 0x1p-26, 1.0, 1.0});
  EXPECT_EQ(half.get_scale(), 1.0f);
  // The bound 2^-25 is exact: just above it does not count.
  GradScaler above({.init_scale = 1.0, .underflow_fraction = 0.5});
  const double just_above = std::nextafter(0x1p-25f, 1.0f);  // in fp32, as the gradient holds it
  step_with(above, opt, p, {just_above, just_above, 0.0, 1.0});
  EXPECT_EQ(above.get_scale(), 1.0f);
}

TEST(GradScalerUnderflow, NeverPastMaxScaleTheOverflowCeilingOrFp16sRange) {
  Tensor p = parameter({4});
  TestSgd opt({p});
  GradScaler bounded({.init_scale = 1.0, .max_scale = 4.0, .underflow_fraction = 0.1});
  for (int s = 0; s < 6; ++s) step_with(bounded, opt, p, {0, 0, 0, 0});
  EXPECT_EQ(bounded.get_scale(), 4.0f);

  // The largest gradient, unscaled, is 1000 / scale: growth stops where it would pass 65504.
  GradScaler ranged({.init_scale = 1.0, .underflow_fraction = 0.1});
  for (int s = 0; s < 12; ++s) {
    const double scale = ranged.get_scale();
    step_with(ranged, opt, p, {0, 0, 0, 1000.0 * scale});
  }
  EXPECT_EQ(ranged.get_scale(), 64.0f) << "1000 * 64 <= 65504 < 1000 * 128";

  // After an overflow at 16 (back off to 8), growth stops below 16.
  GradScaler ceiling({.init_scale = 16.0, .underflow_fraction = 0.1});
  EXPECT_FALSE(step_with(ceiling, opt, p, {0, 0, 0, kInf}));
  EXPECT_EQ(ceiling.get_scale(), 8.0f);
  for (int s = 0; s < 5; ++s) step_with(ceiling, opt, p, {0, 0, 0, 0});
  EXPECT_EQ(ceiling.get_scale(), 8.0f);
  EXPECT_EQ(ceiling.state().at("_overflow_ceiling"), 16.0);
  GradScaler restored({.init_scale = 1.0, .underflow_fraction = 0.1});
  restored.load_state(ceiling.state());
  step_with(restored, opt, p, {0, 0, 0, 0});
  EXPECT_EQ(restored.get_scale(), 8.0f) << "the ceiling is part of the state";

  EXPECT_THROW(GradScaler({.underflow_fraction = 1.0}), Error);
  EXPECT_THROW(GradScaler({.underflow_fraction = 0.5, .underflow_check_interval = 0}), Error);
  // Off by default: PyTorch's state keys only.
  EXPECT_EQ(GradScaler().state().count("_overflow_ceiling"), 0u);
}

}  // namespace
}  // namespace mixp::amp
