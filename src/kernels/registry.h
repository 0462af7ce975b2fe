// The kernel registry: one way to choose a kernel. Private to mixp.
//
// A kernel is declared once, as a Kernel object of its signature. Its candidates are registered
// with it, each for one device and the least instruction set it needs, in the order they are to
// be tried (fastest first), each with an optional predicate saying whether it applies to a
// call (dtype, shape, alignment). A call runs the first candidate that
//   - is for the device of the call: the device of its Tensor arguments, of ranges of Tensors
//     and of arguments with a device() (a struct of tensors); cpu for a kernel of raw pointers.
//     Arguments on different devices are refused,
//   - needs no more than the active ISA (mixp/cpu.h: best_isa() lowered by IsaLimit, --isa),
//   - is the device's fallback when reference_mode() is on (MIXP_REFERENCE=1, ReferenceMode),
//   - and whose predicate, if any, accepts the call's arguments.
// This is oneDNN's ordered implementation lists and PyTorch's DispatchStub in one: the choice
// depends on the device, the ISA and the problem, and callers (the ops, the optimizers, the
// GradScaler) name none of them. A device adds its candidates at run time with add(), so a new
// backend only adds files.
//
// Every device's list ends with its fallback: portable, always applicable, and the path that
// reference mode forces. The cpu's fallbacks, and the scalar twins of the SIMD row kernels,
// are in src/kernels/ref/. The tests' oracles, written from the definitions in double, are never
// candidates: they live with the tests (tests/support/oracle.h and the tests' own loops).
//
// Example:
//
//   // kernels/softmax.h: the declaration
//   using SoftmaxRowsFn = void(const Tensor& x, Tensor& y, int64_t n, bool log);
//   extern Kernel<SoftmaxRowsFn> softmax_rows;
//
//   // kernels/cpu/softmax.cpp: the CPU candidates, best first, ending with the fallback
//   Kernel<SoftmaxRowsFn> softmax_rows("softmax_rows", {
//       {.name = "avx512", .isa = Isa::avx512, .fn = cpu::softmax_rows_avx512},
//       {.name = "scalar", .fn = cpu::softmax_rows_scalar, .fallback = true}});
//
//   // an op
//   kernels::softmax_rows(x, y, n, false);
#pragma once

#include <concepts>
#include <initializer_list>
#include <ranges>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

#include "mixp/cpu.h"
#include "mixp/runtime.h"
#include "mixp/tensor.h"

namespace mixp::kernels {

/// What every Kernel shows of itself, whatever its signature: for listings and tests.
struct KernelInfo {
  struct Entry {
    std::string name;
    Device device;
    Isa isa;
    bool has_predicate;
    bool fallback;
  };
  virtual ~KernelInfo() = default;
  virtual const char* name() const = 0;
  virtual std::vector<Entry> entries() const = 0;
};

/// Every kernel alive, in the order they were constructed.
const std::vector<const KernelInfo*>& all_kernels();
void register_kernel_info(const KernelInfo* kernel);
void unregister_kernel_info(const KernelInfo* kernel);
/// The device of a call, checked to be the same for all its Tensor arguments.
[[noreturn]] void throw_mixed_devices(const char* kernel, Device a, Device b);
[[noreturn]] void throw_no_candidate(const char* kernel, Device device, Isa isa, bool reference);

namespace detail {
inline void note_one_device(const char* kernel, Device d, Device& device, bool& found) {
  if (!found) {
    device = d;
    found = true;
  } else if (d != device) {
    throw_mixed_devices(kernel, device, d);
  }
}

/// An argument that says where its memory is: a Tensor, a range of Tensors, or a struct of
/// them with a `Device device() const` (which reports the device of its defined tensors and
/// throws if they disagree).
template <typename A>
concept HasDevice = requires(const A& a) {
  { a.device() } -> std::convertible_to<Device>;
};

template <typename A>
concept RangeOfTensors = std::ranges::range<A> &&
                         std::is_same_v<std::remove_cvref_t<std::ranges::range_value_t<A>>, Tensor>;
template <typename A>
concept RangeWithDevices =
    std::ranges::range<A> && HasDevice<std::remove_cvref_t<std::ranges::range_value_t<A>>>;

template <typename A>
void note_device(const char* kernel, const A& arg, Device& device, bool& found) {
  using T = std::remove_cvref_t<A>;
  if constexpr (std::is_same_v<T, Tensor>) {
    if (arg.defined()) note_one_device(kernel, arg.device(), device, found);
  } else if constexpr (RangeOfTensors<T>) {
    for (const Tensor& t : arg) note_device(kernel, t, device, found);
  } else if constexpr (RangeWithDevices<T>) {
    for (const auto& item : arg) note_one_device(kernel, item.device(), device, found);
  } else if constexpr (HasDevice<T>) {
    note_one_device(kernel, arg.device(), device, found);
  }
}
}  // namespace detail

template <typename Signature>
class Kernel;

template <typename R, typename... Args>
class Kernel<R(Args...)> final : public KernelInfo {
 public:
  using Fn = R (*)(Args...);
  using Predicate = bool (*)(const std::remove_cvref_t<Args>&...);

  struct Candidate {
    const char* name = "";
    Device device = Device::cpu;
    Isa isa = Isa::scalar;          ///< the least ISA it needs (cpu candidates)
    Predicate applies = nullptr;    ///< null: every call
    Fn fn = nullptr;
    bool fallback = false;          ///< the device's portable candidate, last in its list
  };

  Kernel(const char* name, std::initializer_list<Candidate> candidates)
      : name_(name), candidates_(candidates) {
    register_kernel_info(this);
  }
  ~Kernel() override { unregister_kernel_info(this); }
  Kernel(const Kernel&) = delete;
  Kernel& operator=(const Kernel&) = delete;

  /// Adds a candidate after the ones already there: a device's candidates are tried in the
  /// order they were added. Not safe while another thread calls the kernel: devices add
  /// their candidates when they start.
  void add(const Candidate& candidate) { candidates_.push_back(candidate); }

  R operator()(Args... args) const { return select(args...).fn(std::forward<Args>(args)...); }

  /// The candidate a call with these arguments runs.
  const Candidate& select(const Args&... args) const {
    Device device = Device::cpu;
    bool found = false;
    (detail::note_device(name_, args, device, found), ...);
    return select_on(device, args...);
  }

  /// The candidate that would run these arguments on `device`: a device whose memory the host
  /// can reach runs the cpu's candidates on it this way.
  const Candidate& select_on(Device device, const Args&... args) const {
    const Isa isa = active_isa();
    const bool reference = reference_mode();
    for (const Candidate& c : candidates_) {
      if (c.device != device || (device == Device::cpu && c.isa > isa)) continue;
      if (reference && !c.fallback) continue;
      if (c.applies != nullptr && !c.applies(args...)) continue;
      return c;
    }
    throw_no_candidate(name_, device, isa, reference);
  }

  const char* name() const override { return name_; }
  std::vector<Entry> entries() const override {
    std::vector<Entry> out;
    for (const Candidate& c : candidates_)
      out.push_back({c.name, c.device, c.isa, c.applies != nullptr, c.fallback});
    return out;
  }

 private:
  const char* name_;
  std::vector<Candidate> candidates_;
};

}  // namespace mixp::kernels
