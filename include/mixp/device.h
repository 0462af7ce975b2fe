// mixp/device.h — where a tensor's memory lives, and how a new device joins mixp.
//
// Every tensor has a device. Its storage comes from that device's backend, and data moves
// between devices only by an explicit copy (Tensor::to(Device)). Kernels are chosen for the
// device of their tensors (src/kernels/registry.h), so a new device brings two things: a
// DeviceBackend (its memory and its copies to and from the host), registered here, and its
// kernels, registered with the kernel registry. Nothing else in mixp changes.
//
// The cpu device is always there; Device::cuda is the name a CUDA backend will register under.
// Other devices get their value from register_device().
//
// Example:
//
//   class MyBackend : public mixp::DeviceBackend { ... };
//   const mixp::Device mine = mixp::register_device(std::make_unique<MyBackend>());
//   mixp::Tensor x = mixp::ones({4}).to(mine);      // allocated by MyBackend, copied in
//   mixp::Tensor back = x.to(mixp::Device::cpu);    // copied out
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>

namespace mixp {

enum class Device : uint8_t { cpu = 0, cuda = 1 };

/// "cpu", or the name a registered device's backend gives itself.
const char* name_of(Device device);

class Tensor;

/// A device's memory, its copies to and from host memory, and the two element-wise primitives
/// that Tensor's own methods (clone, to(DType), copy_, fill_) need there. Every function may be
/// called from any thread. allocate() throws mixp::Error when the device cannot give the memory.
class DeviceBackend {
 public:
  virtual ~DeviceBackend() = default;
  virtual const char* name() const = 0;
  /// At least `bytes` bytes, aligned to 64; nullptr for 0 bytes.
  virtual void* allocate(size_t bytes) = 0;
  /// Gives back a block from allocate() of the same size.
  virtual void deallocate(void* block, size_t bytes) noexcept = 0;
  virtual void copy_to_host(void* host, const void* device, size_t bytes) = 0;
  virtual void copy_from_host(void* device, const void* host, size_t bytes) = 0;
  /// dst = src, both on this device with the same number of elements; a change of dtype rounds
  /// to nearest even, as mixp::convert does.
  virtual void copy(const Tensor& src, Tensor& dst) = 0;
  /// Every element of `t`, on this device, set to `value` rounded to its dtype.
  virtual void fill(Tensor& t, double value) = 0;
};

/// Adds a device and returns its value. Devices are never removed; at most 254 can be added.
Device register_device(std::unique_ptr<DeviceBackend> backend);
/// The backend of a device; throws mixp::Error for a value no backend registered.
DeviceBackend& device_backend(Device device);

}  // namespace mixp
