// StateDict: typed access to the exact text of saved values, and prefixes.
#include "mixp/state_dict.h"

#include <charconv>
#include <cmath>
#include <cstdio>

#include "mixp/error.h"

namespace mixp {
namespace {

template <typename Int>
Int parse_integer(const std::string& key, const std::string& text, const char* kind) {
  Int value{};
  const char* end = text.data() + text.size();
  const auto [at, ec] = std::from_chars(text.data(), end, value);
  MIXP_CHECK(ec == std::errc() && at == end && !text.empty(), "saved value '", key, "' is '", text,
             "', not ", kind);
  return value;
}

}  // namespace

void StateDict::set_int(const std::string& key, int64_t value) {
  values[key] = std::to_string(value);
}
void StateDict::set_uint(const std::string& key, uint64_t value) {
  values[key] = std::to_string(value);
}
void StateDict::set_real(const std::string& key, double value) {
  char buf[40];
  std::snprintf(buf, sizeof buf, "%.17g", value);
  values[key] = buf;
}
void StateDict::set_text(const std::string& key, std::string value) {
  values[key] = std::move(value);
}
void StateDict::set_philox(const std::string& key, const PhiloxState& state) {
  set_uint(key + ".seed", state.seed);
  set_uint(key + ".stream", state.stream);
  set_uint(key + ".offset", state.offset);
}

const std::string& StateDict::get_text(const std::string& key) const {
  const auto it = values.find(key);
  MIXP_CHECK(it != values.end(), "saved state has no value '", key, "'");
  return it->second;
}
int64_t StateDict::get_int(const std::string& key) const {
  return parse_integer<int64_t>(key, get_text(key), "an integer");
}
uint64_t StateDict::get_uint(const std::string& key) const {
  return parse_integer<uint64_t>(key, get_text(key), "an unsigned integer");
}
double StateDict::get_real(const std::string& key) const {
  const std::string& text = get_text(key);
  // strtod, not from_chars: it reads "inf" and "nan" too, which a loss or scale may hold.
  char* end = nullptr;
  const double value = std::strtod(text.c_str(), &end);
  MIXP_CHECK(!text.empty() && end == text.c_str() + text.size(), "saved value '", key, "' is '",
             text, "', not a number");
  return value;
}
PhiloxState StateDict::get_philox(const std::string& key) const {
  return {.seed = get_uint(key + ".seed"),
          .stream = get_uint(key + ".stream"),
          .offset = get_uint(key + ".offset")};
}

const Tensor& StateDict::tensor(const std::string& key) const {
  const auto it = tensors.find(key);
  MIXP_CHECK(it != tensors.end(), "saved state has no tensor '", key, "'");
  return it->second;
}
const Tensor& StateDict::tensor(const std::string& key, const Tensor& like) const {
  return tensor(key, like.dtype(), like.shape());
}
const Tensor& StateDict::tensor(const std::string& key, DType dtype, const Shape& shape) const {
  const Tensor& t = tensor(key);
  MIXP_CHECK(t.dtype() == dtype && t.shape() == shape, "saved tensor '", key, "' is ",
             name_of(t.dtype()), " ", t.shape().to_string(), ", this run has ", name_of(dtype), " ",
             shape.to_string());
  return t;
}

void StateDict::insert(const std::string& prefix, const StateDict& part) {
  for (const auto& [key, t] : part.tensors) tensors[prefix + "/" + key] = t;
  for (const auto& [key, v] : part.values) values[prefix + "/" + key] = v;
}

StateDict StateDict::part(const std::string& prefix) const {
  const std::string start = prefix + "/";
  StateDict out;
  for (auto it = tensors.lower_bound(start); it != tensors.end() && it->first.starts_with(start);
       ++it)
    out.tensors.emplace(it->first.substr(start.size()), it->second);
  for (auto it = values.lower_bound(start); it != values.end() && it->first.starts_with(start);
       ++it)
    out.values.emplace(it->first.substr(start.size()), it->second);
  return out;
}

}  // namespace mixp
