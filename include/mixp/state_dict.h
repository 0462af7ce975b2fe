// mixp/state_dict.h — the saved state of one stateful part of a training run, as PyTorch's
// state_dict: tensors by key, and every other value as exact text.
//
// Each part of a run (the model, each optimizer, the learning-rate schedule, the GradScaler,
// the FP8 recipe state, the data loader, the trainer's counters) writes its state with
// state_dict() and restores it with load_state_dict(). A checkpoint is their union, each part
// under a prefix of its own ("model/", "optimizer.0/", ...): insert() and part() move entries
// under and out of a prefix. Values are text so that every number round-trips exactly:
// integers in decimal, reals with 17 significant digits. The getters throw mixp::Error naming
// the key that is missing or malformed, so that a part can check the whole state before it
// changes anything.
//
// Example:
//
//   mixp::StateDict s;
//   s.set_int("steps", 12);
//   s.tensors["exp_avg/0"] = m;
//   mixp::StateDict all;
//   all.insert("optimizer.0", s);                  // "optimizer.0/steps", "optimizer.0/exp_avg/0"
//   int64_t steps = all.part("optimizer.0").get_int("steps");   // 12
#pragma once

#include <cstdint>
#include <map>
#include <string>

#include "mixp/random.h"
#include "mixp/tensor.h"

namespace mixp {

class StateDict {
 public:
  std::map<std::string, Tensor> tensors;
  std::map<std::string, std::string> values;

  void set_int(const std::string& key, int64_t value);
  void set_uint(const std::string& key, uint64_t value);
  void set_real(const std::string& key, double value);
  void set_text(const std::string& key, std::string value);
  /// "key.seed", "key.stream" and "key.offset".
  void set_philox(const std::string& key, const PhiloxState& state);

  bool has_value(const std::string& key) const { return values.count(key) != 0; }
  bool has_tensor(const std::string& key) const { return tensors.count(key) != 0; }

  /// The value of `key`; throws mixp::Error when it is missing or not of the asked kind.
  int64_t get_int(const std::string& key) const;
  uint64_t get_uint(const std::string& key) const;
  double get_real(const std::string& key) const;
  const std::string& get_text(const std::string& key) const;
  PhiloxState get_philox(const std::string& key) const;
  /// The tensor of `key`; throws mixp::Error when it is missing, or (with `like`) when its
  /// dtype or shape differ from like's, naming both.
  const Tensor& tensor(const std::string& key) const;
  const Tensor& tensor(const std::string& key, const Tensor& like) const;
  const Tensor& tensor(const std::string& key, DType dtype, const Shape& shape) const;

  /// Adds every entry of `part` as "prefix/key".
  void insert(const std::string& prefix, const StateDict& part);
  /// The entries under "prefix/", with the prefix removed.
  StateDict part(const std::string& prefix) const;
};

}  // namespace mixp
