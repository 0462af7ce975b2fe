#include "mixp/tensor.h"

#include <cmath>
#include <cstdlib>
#include <cstring>
#include <ostream>
#include <sstream>

#include "mixp/error.h"
#include "tensor/autograd_hooks.h"
#include "tensor/block_cache.h"
#include "tensor/element.h"
#include "tensor/tensor_impl.h"

namespace mixp {

namespace detail {
namespace {
AutogradHooks g_autograd_hooks;
}  // namespace

void install_autograd_hooks(const AutogradHooks& hooks) {
  MIXP_ASSERT(hooks.record_view && hooks.record_slice && hooks.record_cast && hooks.run_backward &&
              hooks.node_name);
  g_autograd_hooks = hooks;
}
}  // namespace detail

namespace {
// Installed before main() by src/autograd/engine.cpp, which is always linked (CMakeLists.txt).
const detail::AutogradHooks& autograd_hooks() {
  MIXP_ASSERT(detail::g_autograd_hooks.run_backward != nullptr);
  return detail::g_autograd_hooks;
}
}  // namespace

// ---- Shape ----

Shape::Shape(std::initializer_list<int64_t> dims)
    : Shape(std::span<const int64_t>(dims.begin(), dims.size())) {}

Shape::Shape(std::span<const int64_t> dims) {
  MIXP_CHECK(dims.size() <= size_t(kMaxDims), "shape: at most ", kMaxDims, " dimensions, got ",
             dims.size());
  for (size_t i = 0; i < dims.size(); ++i) {
    MIXP_CHECK(dims[i] >= 0, "shape: sizes must be non-negative, got ", dims[i], " in dimension ",
               i);
    dims_[i] = dims[i];
  }
  ndim_ = int(dims.size());
}

int Shape::normalize_dim(int i, const char* op) const {
  const int d = i < 0 ? i + ndim_ : i;
  MIXP_CHECK(d >= 0 && d < ndim_, op, ": dimension ", i, " is out of range for shape ",
             to_string());
  return d;
}

int64_t Shape::size(int i) const { return dims_[size_t(normalize_dim(i, "size"))]; }

int64_t Shape::numel() const {
  int64_t n = 1;
  for (int i = 0; i < ndim_; ++i) n *= dims_[size_t(i)];
  return n;
}

std::string Shape::to_string() const {
  std::string s = "[";
  for (int i = 0; i < ndim_; ++i) s += (i ? ", " : "") + std::to_string(dims_[size_t(i)]);
  return s + "]";
}

bool operator==(const Shape& a, const Shape& b) {
  if (a.ndim_ != b.ndim_) return false;
  for (int i = 0; i < a.ndim_; ++i) {
    if (a.dims_[size_t(i)] != b.dims_[size_t(i)]) return false;
  }
  return true;
}

// ---- Storage ----

Storage::Storage(size_t n, MemoryTag t, DType d, Device where)
    : bytes(n), tag(t), dtype(d), device(where) {
  data = device_backend(device).allocate(n);
  memory::record_allocation(tag, dtype, int64_t(bytes));
}

Storage::~Storage() {
  device_backend(device).deallocate(data, bytes);
  memory::record_release(tag, dtype, int64_t(bytes));
}

Tensor make_view(const Tensor& base, const Shape& shape, int64_t offset) {
  auto impl = std::make_shared<TensorImpl>();
  impl->storage = base.impl()->storage;
  impl->offset = offset;
  impl->shape = shape;
  impl->dtype = base.dtype();
  impl->device = base.device();
  return Tensor(std::move(impl));
}

// ---- Tensor ----

const TensorImpl& Tensor::checked() const {
  MIXP_CHECK(impl_ != nullptr, "the tensor is undefined");
  return *impl_;
}

const Shape& Tensor::shape() const { return checked().shape; }
int64_t Tensor::numel() const { return checked().shape.numel(); }
DType Tensor::dtype() const { return checked().dtype; }
Device Tensor::device() const { return checked().device; }
MemoryTag Tensor::tag() const { return checked().storage->tag; }
void* Tensor::raw_data() { return checked().bytes(); }
const void* Tensor::raw_data() const { return checked().bytes(); }

template <typename T>
T* Tensor::data() {
  MIXP_CHECK(dtype() == element_dtype<T>(), "data<", name_of(element_dtype<T>()), ">() of a ",
             name_of(dtype()), " tensor");
  return static_cast<T*>(raw_data());
}
template <typename T>
const T* Tensor::data() const {
  MIXP_CHECK(dtype() == element_dtype<T>(), "data<", name_of(element_dtype<T>()), ">() of a ",
             name_of(dtype()), " tensor");
  return static_cast<const T*>(raw_data());
}
#define MIXP_INSTANTIATE_DATA(T) \
  template T* Tensor::data<T>(); \
  template const T* Tensor::data<T>() const;
MIXP_INSTANTIATE_DATA(float)
MIXP_INSTANTIATE_DATA(double)
MIXP_INSTANTIATE_DATA(float16)
MIXP_INSTANTIATE_DATA(bfloat16)
MIXP_INSTANTIATE_DATA(float8_e4m3)
MIXP_INSTANTIATE_DATA(float8_e5m2)
MIXP_INSTANTIATE_DATA(int32_t)
MIXP_INSTANTIATE_DATA(int64_t)
MIXP_INSTANTIATE_DATA(uint8_t)
#undef MIXP_INSTANTIATE_DATA

double Tensor::item() const {
  MIXP_CHECK(numel() == 1, "item: the tensor has ", numel(), " elements (shape ",
             shape().to_string(), "), not one");
  if (device() != Device::cpu) return detach().to(Device::cpu).item();
  return load_element(raw_data(), dtype(), 0);
}

std::vector<double> Tensor::to_vector() const {
  if (device() != Device::cpu) return detach().to(Device::cpu).to_vector();
  std::vector<double> v(static_cast<size_t>(numel()));
  for (int64_t i = 0; i < numel(); ++i) v[size_t(i)] = load_element(raw_data(), dtype(), i);
  return v;
}

Tensor Tensor::reshape(std::vector<int64_t> dims) const {
  int infer = -1;
  int64_t known = 1;
  std::string wanted = "[";
  for (size_t i = 0; i < dims.size(); ++i) wanted += (i ? ", " : "") + std::to_string(dims[i]);
  wanted += "]";
  for (size_t i = 0; i < dims.size(); ++i) {
    if (dims[i] == -1) {
      MIXP_CHECK(infer < 0, "reshape: only one dimension may be -1, got ", wanted);
      infer = int(i);
    } else {
      known *= dims[i];
    }
  }
  if (infer >= 0) {
    MIXP_CHECK(known > 0 && numel() % known == 0, "reshape: cannot reshape ", shape().to_string(),
               " into ", wanted);
    dims[size_t(infer)] = numel() / known;
  }
  return view(Shape(dims));
}

Tensor Tensor::view(const Shape& target) const {
  MIXP_CHECK(target.numel() == numel(), "reshape: cannot reshape ", shape().to_string(), " (",
             numel(), " elements) into ", target.to_string(), " (", target.numel(), " elements)");
  Tensor out = make_view(*this, target, checked().offset);
  if (requires_grad()) autograd_hooks().record_view(*this, out);
  return out;
}

Tensor Tensor::slice(int64_t begin, int64_t end) const {
  MIXP_CHECK(ndim() >= 1, "slice: a scalar has no dimension 0");
  const int64_t rows = shape()[0];
  MIXP_CHECK(begin >= 0 && begin <= end && end <= rows, "slice: rows [", begin, ", ", end,
             ") are out of range for shape ", shape().to_string());
  Shape s = shape();
  s[0] = end - begin;
  const int64_t row_elements = rows == 0 ? 0 : numel() / rows;
  Tensor out = make_view(*this, s, checked().offset + begin * row_elements);
  if (requires_grad()) autograd_hooks().record_slice(*this, out, begin);
  return out;
}

Tensor Tensor::clone(MemoryTag tag) const {
  Tensor out = empty(shape(), dtype(), tag, device());
  device_backend(device()).copy(*this, out);
  return out;
}

Tensor Tensor::to(DType target) const {
  if (target == dtype()) return *this;
  Tensor out = empty(shape(), target,
                     tag() == MemoryTag::parameter ? MemoryTag::parameter : MemoryTag::activation,
                     device());
  device_backend(device()).copy(*this, out);
  if (requires_grad()) autograd_hooks().record_cast(*this, out);
  return out;
}

Tensor Tensor::to(Device target) const {
  if (target == device()) return *this;
  MIXP_CHECK(is_leaf(), "to(", name_of(target),
             "): the tensor is the result of an op with autograd history; move the parameters "
             "and inputs, or detach() it first");
  Tensor out = empty(shape(), dtype(), tag(), target);
  const size_t bytes = nbytes();
  if (device() == Device::cpu) {
    device_backend(target).copy_from_host(out.raw_data(), raw_data(), bytes);
  } else if (target == Device::cpu) {
    device_backend(device()).copy_to_host(out.raw_data(), raw_data(), bytes);
  } else {
    Tensor host = to(Device::cpu);
    device_backend(target).copy_from_host(out.raw_data(), host.raw_data(), bytes);
  }
  if (checked().autograd.requires_grad) out.set_requires_grad(true);
  return out;
}

Tensor Tensor::to(DType target, Philox& generator) const {
  MIXP_CHECK(dtype() == DType::f32 && (target == DType::bf16 || target == DType::f16),
             "to: stochastic rounding converts f32 to bf16 or f16, not ", name_of(dtype()), " to ",
             name_of(target));
  MIXP_CHECK(device() == Device::cpu, "to: stochastic rounding runs on the cpu; this tensor is on ",
             name_of(device()));
  Tensor out = empty(shape(), target);
  convert_elements_stochastic(*this, out, generator.state());
  PhiloxState next = generator.state();
  next.offset += uint64_t(numel());
  generator.set_state(next);
  if (requires_grad()) autograd_hooks().record_cast(*this, out);
  return out;
}

void Tensor::copy_(const Tensor& src) {
  MIXP_CHECK(src.shape() == shape(), "copy_: source shape ", src.shape().to_string(),
             " differs from destination shape ", shape().to_string());
  MIXP_CHECK(src.device() == device(), "copy_: the source is on ", name_of(src.device()),
             " and the destination on ", name_of(device()), "; move it with to(Device) first");
  device_backend(device()).copy(src, *this);
  ++checked().storage->version;
}

void Tensor::fill_(double value) {
  device_backend(device()).fill(*this, value);
  ++checked().storage->version;
}

bool Tensor::requires_grad() const {
  const TensorImpl& t = checked();
  return t.autograd.requires_grad || t.autograd.grad_fn != nullptr;
}

Tensor& Tensor::set_requires_grad(bool requires_grad) {
  TensorImpl& t = const_cast<TensorImpl&>(checked());
  MIXP_CHECK(t.autograd.grad_fn == nullptr,
             "set_requires_grad: only leaf tensors can be marked; "
             "this one is the result of ",
             autograd_hooks().node_name(*t.autograd.grad_fn), " (use detach())");
  MIXP_CHECK(!requires_grad || is_floating(t.dtype), "set_requires_grad: a ", name_of(t.dtype),
             " tensor cannot have gradients");
  t.autograd.requires_grad = requires_grad;
  return *this;
}

Tensor Tensor::grad() const { return checked().autograd.grad; }

void Tensor::set_grad(const Tensor& grad) {
  TensorImpl& t = const_cast<TensorImpl&>(checked());
  if (grad.defined()) {
    MIXP_CHECK(grad.shape() == t.shape, "set_grad: gradient shape ", grad.shape().to_string(),
               " differs from the tensor's ", t.shape.to_string());
  }
  t.autograd.grad = grad;
}

DType Tensor::grad_dtype() const {
  const TensorImpl& t = checked();
  return t.autograd.grad_dtype.value_or(t.dtype);
}

Tensor& Tensor::set_grad_dtype(DType dtype) {
  MIXP_CHECK(is_floating(dtype), "set_grad_dtype: gradients must be floating point, got ",
             name_of(dtype));
  const_cast<TensorImpl&>(checked()).autograd.grad_dtype = dtype;
  return *this;
}

void Tensor::backward(const Tensor& gradient) const {
  MIXP_CHECK(requires_grad(),
             "backward: the tensor does not require grad (nothing that led to "
             "it was marked with set_requires_grad)");
  Tensor g = gradient;
  if (!g.defined()) {
    MIXP_CHECK(numel() == 1, "backward: a gradient is needed for a tensor of shape ",
               shape().to_string(), "; only one-element tensors default to 1");
    g = ones(shape(), dtype(), MemoryTag::activation, device());
  }
  MIXP_CHECK(g.shape() == shape(), "backward: gradient shape ", g.shape().to_string(),
             " differs from the tensor's ", shape().to_string());
  autograd_hooks().run_backward({*this}, {g});
}

Tensor Tensor::detach() const { return make_view(*this, shape(), checked().offset); }
bool Tensor::is_leaf() const { return checked().autograd.grad_fn == nullptr; }
const std::shared_ptr<autograd::Node>& Tensor::grad_fn() const {
  return checked().autograd.grad_fn;
}
uint64_t Tensor::version() const { return checked().storage->version.load(); }

std::string Tensor::to_string(int max_elements) const {
  if (!defined()) return "tensor(undefined)";
  std::ostringstream out;
  out << "tensor(" << shape().to_string() << ", " << name_of(dtype());
  if (requires_grad()) out << ", requires_grad";
  out << ") [";
  if (device() != Device::cpu) out << ", " << name_of(device());
  const int64_t n = numel();
  const int64_t shown = std::min<int64_t>(n, max_elements);
  const Tensor host = detach().to(Device::cpu);
  for (int64_t i = 0; i < shown; ++i) {
    out << (i ? ", " : "") << load_element(host.raw_data(), dtype(), i);
  }
  if (shown < n) out << ", ... (" << n - shown << " more)";
  out << "]";
  return out.str();
}

std::ostream& operator<<(std::ostream& out, const Tensor& t) { return out << t.to_string(); }

// ---- creation ----

Tensor empty(const Shape& shape, DType dtype, MemoryTag tag, Device device) {
  auto impl = std::make_shared<TensorImpl>();
  impl->storage = std::make_shared<Storage>(size_t(shape.numel()) * size_t(size_of(dtype)), tag,
                                            dtype, device);
  impl->shape = shape;
  impl->dtype = dtype;
  impl->device = device;
  return Tensor(std::move(impl));
}

Tensor zeros(const Shape& shape, DType dtype, MemoryTag tag, Device device) {
  return full(shape, 0.0, dtype, tag, device);
}

Tensor ones(const Shape& shape, DType dtype, MemoryTag tag, Device device) {
  return full(shape, 1.0, dtype, tag, device);
}

Tensor full(const Shape& shape, double value, DType dtype, MemoryTag tag, Device device) {
  Tensor t = empty(shape, dtype, tag, device);
  device_backend(device).fill(t, value);
  return t;
}

Tensor arange(int64_t n, DType dtype) {
  MIXP_CHECK(n >= 0, "arange: n must be non-negative, got ", n);
  Tensor t = empty({n}, dtype);
  for (int64_t i = 0; i < n; ++i) store_element(t.raw_data(), dtype, i, double(i));
  return t;
}

Tensor from_buffer(const void* data, const Shape& shape, DType dtype, MemoryTag tag) {
  Tensor t = empty(shape, dtype, tag);
  MIXP_CHECK(data != nullptr || t.nbytes() == 0, "from_buffer: no data for shape ",
             shape.to_string());
  if (t.nbytes() > 0) std::memcpy(t.raw_data(), data, t.nbytes());
  return t;
}

Tensor from_values(std::span<const double> values, const Shape& shape, DType dtype, MemoryTag tag) {
  MIXP_CHECK(int64_t(values.size()) == shape.numel(), "from_values: ", values.size(),
             " values do not fill shape ", shape.to_string(), " (", shape.numel(), " elements)");
  Tensor t = empty(shape, dtype, tag);
  for (size_t i = 0; i < values.size(); ++i)
    store_element(t.raw_data(), dtype, int64_t(i), values[i]);
  return t;
}

Tensor from_values(std::initializer_list<double> values, const Shape& shape, DType dtype) {
  return from_values(std::span<const double>(values.begin(), values.size()), shape, dtype);
}

Tensor randn(const Shape& shape, Philox& generator, double stddev, DType dtype, MemoryTag tag) {
  Tensor t = empty(shape, dtype, tag);
  for (int64_t i = 0; i < t.numel(); ++i) {
    store_element(t.raw_data(), dtype, i, double(generator.normal()) * stddev);
  }
  return t;
}

Tensor uniform(const Shape& shape, Philox& generator, double low, double high, DType dtype,
               MemoryTag tag) {
  MIXP_CHECK(low < high, "uniform: low (", low, ") must be below high (", high, ")");
  Tensor t = empty(shape, dtype, tag);
  for (int64_t i = 0; i < t.numel(); ++i) {
    store_element(t.raw_data(), dtype, i, low + (high - low) * double(generator.uniform()));
  }
  return t;
}

}  // namespace mixp
