// Optimizers' state_dict(): a state loaded into a fresh optimizer continues bitwise as the one
// that saved it, for every optimizer and precision mode; a state that does not fit is refused
// naming the key, and changes nothing.
#include <gtest/gtest.h>

#include <functional>
#include <memory>
#include <vector>

#include "mixp/error.h"
#include "mixp/optim/adam.h"
#include "mixp/optim/adamw.h"
#include "mixp/optim/sgd.h"
#include "optim/optim_test_util.h"

namespace mixp {
namespace {

using optim::Precision;
using Make = std::function<std::unique_ptr<optim::Optimizer>(Tensor)>;

struct Case {
  const char* name;
  Make make;
};

std::vector<Case> cases(Precision precision) {
  const PhiloxState rng{.seed = 3, .stream = 5};
  return {
      {"sgd",
       [=](Tensor p) {
         return std::make_unique<optim::Sgd>(std::vector<Tensor>{p},
                                             optim::SgdOptions{.lr = 0.05,
                                                               .momentum = 0.9,
                                                               .nesterov = true,
                                                               .precision = precision,
                                                               .rounding = rng});
       }},
      {"adam",
       [=](Tensor p) {
         return std::make_unique<optim::Adam>(
             std::vector<Tensor>{p},
             optim::AdamOptions{.lr = 0.01, .weight_decay = 0.1, .precision = precision,
                                .rounding = rng});
       }},
      {"adamw", [=](Tensor p) {
         return std::make_unique<optim::AdamW>(
             std::vector<Tensor>{p}, optim::AdamWOptions{.lr = 0.01,
                                                         .precision = precision,
                                                         .rounding = rng,
                                                         .state_dtype = DType::bf16});
       }}};
}

TEST(OptimizerStateDict, ALoadedStateContinuesBitwise) {
  auto grad = [](int s) { return test::values(s, 999, 1e-2); };
  for (const Precision precision :
       {Precision::master_fp32, Precision::stochastic_rounding, Precision::kahan}) {
    for (const DType dtype : {DType::f32, DType::bf16, DType::f16}) {
      for (const Case& c : cases(precision)) {
        SCOPED_TRACE(std::string(c.name) + " " + name_of(precision) + " " + name_of(dtype));
        Tensor a = test::parameter(test::values(1, 999), dtype);
        auto straight = c.make(a);
        for (int s = 0; s < 6; ++s) {
          test::set_grad(a, grad(s), DType::f32);
          straight->step();
        }
        Tensor b = test::parameter(test::values(1, 999), dtype);
        auto first = c.make(b);
        for (int s = 0; s < 3; ++s) {
          test::set_grad(b, grad(s), DType::f32);
          first->step();
        }
        const StateDict saved = first->state_dict();
        EXPECT_EQ(saved.get_text("kind"), c.name);
        // A fresh optimizer over a parameter restored as a checkpoint restores it: copy_.
        Tensor resumed_param = test::parameter(test::values(9, 999), dtype);
        auto resumed = c.make(resumed_param);
        resumed_param.copy_(b);
        resumed->load_state_dict(saved);
        for (int s = 3; s < 6; ++s) {
          test::set_grad(resumed_param, grad(s), DType::f32);
          resumed->step();
        }
        EXPECT_EQ(test::bits_of<uint64_t>(resumed_param.to(DType::f64)),
                  test::bits_of<uint64_t>(a.to(DType::f64)));
        EXPECT_EQ(resumed->steps(), straight->steps());
      }
    }
  }
}

TEST(OptimizerStateDict, AStateThatDoesNotFitIsRefusedNamingTheKeyAndChangesNothing) {
  Tensor p = test::parameter(test::values(1, 10), DType::bf16);
  optim::AdamW adamw({p}, {.lr = 0.01});
  test::set_grad(p, test::values(2, 10), DType::f32);
  adamw.step();
  const StateDict good = adamw.state_dict();
  optim::Sgd sgd({test::parameter(test::values(1, 10), DType::bf16)}, {.momentum = 0.9});
  try {
    sgd.load_state_dict(good);
    FAIL() << "an adamw state loaded into sgd";
  } catch (const Error& e) {
    EXPECT_NE(e.message().find("the saved optimizer is adamw, this run's is sgd"),
              std::string::npos)
        << e.message();
  }
  Tensor q = test::parameter(test::values(1, 10), DType::bf16);
  optim::AdamW other({q}, {.lr = 0.01});
  const std::vector<uint16_t> before = test::bits_of<uint16_t>(q);
  for (const char* key : {"exp_avg/0", "master/0"}) {
    SCOPED_TRACE(key);
    StateDict bad = good;
    bad.tensors[key] = test::parameter(test::values(1, 11), DType::f32).detach();
    try {
      other.load_state_dict(bad);
      FAIL() << "a tensor of another shape loaded";
    } catch (const Error& e) {
      EXPECT_NE(e.message().find(std::string("saved tensor '") + key + "'"), std::string::npos)
          << e.message();
    }
    EXPECT_EQ(other.steps(), 0);
    EXPECT_EQ(test::bits_of<uint16_t>(q), before);
  }
  StateDict missing = good;
  missing.values.erase("parameter_steps/0");
  EXPECT_THROW(other.load_state_dict(missing), Error);
  EXPECT_EQ(other.steps(), 0);
}

TEST(StateDictValues, RoundTripExactlyAndNameWhatIsMissing) {
  StateDict s;
  s.set_int("a", -9007199254740993);
  s.set_uint("b", 18446744073709551615u);
  s.set_real("c", 0.1);
  s.set_philox("r", {.seed = 1, .stream = 2, .offset = 3});
  StateDict all;
  all.insert("part", s);
  const StateDict back = all.part("part");
  EXPECT_EQ(back.get_int("a"), -9007199254740993);
  EXPECT_EQ(back.get_uint("b"), 18446744073709551615u);
  EXPECT_EQ(back.get_real("c"), 0.1);
  EXPECT_EQ(back.get_philox("r"), (PhiloxState{.seed = 1, .stream = 2, .offset = 3}));
  EXPECT_TRUE(all.part("other").values.empty());
  try {
    (void)back.get_int("z");
    FAIL();
  } catch (const Error& e) {
    EXPECT_NE(e.message().find("'z'"), std::string::npos);
  }
  EXPECT_THROW((void)back.get_int("c"), Error);  // 0.1 is not an integer
  EXPECT_THROW((void)back.get_uint("a"), Error);
}

}  // namespace
}  // namespace mixp
