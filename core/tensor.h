// A dense, contiguous, shape-carrying handle on shared storage.
//
// Copying a Tensor copies the handle, not the bytes (like at::Tensor): views
// made with view()/reshape() share storage with their source, which is how a
// bucket's flat buffer and its per-gradient views stay one piece of memory.
#ifndef DDPX_CORE_TENSOR_H_
#define DDPX_CORE_TENSOR_H_

#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "core/dtype.h"
#include "core/half.h"

namespace ddpx {

using Shape = std::vector<int64_t>;

int64_t shape_numel(const Shape& shape);
// "[3, 4]".
std::string shape_str(const Shape& shape);

// Allocates and frees memory of one non-CPU device type. cuda/ registers one
// for Device::Type::kCUDA when built with --config=cuda.
class DeviceAllocator {
 public:
  virtual ~DeviceAllocator() = default;
  virtual absl::StatusOr<void*> allocate(size_t nbytes, int device_index) = 0;
  virtual void deallocate(void* ptr, size_t nbytes, int device_index) = 0;
  // Copies between any two of {host, device memory}; synchronous.
  virtual absl::Status copy(void* dst, Device dst_device, const void* src,
                            Device src_device, size_t nbytes) = 0;
};
void register_device_allocator(Device::Type type, DeviceAllocator* allocator);
DeviceAllocator* device_allocator(Device::Type type);  // null if none

// Owns one allocation.
class Storage {
 public:
  // CPU storage, 64-byte aligned, zero-initialized unless `zeroed` is false.
  explicit Storage(size_t nbytes, bool zeroed = true);
  // Memory of another device from its registered allocator.
  static absl::StatusOr<std::shared_ptr<Storage>> allocate(size_t nbytes,
                                                            Device device);
  // Wraps caller-owned memory; the caller keeps it alive.
  static std::shared_ptr<Storage> borrow(void* data, size_t nbytes, Device device);
  ~Storage();
  Storage(const Storage&) = delete;
  Storage& operator=(const Storage&) = delete;

  void* data() const { return data_; }
  size_t nbytes() const { return nbytes_; }
  Device device() const { return device_; }

 private:
  Storage(void* data, size_t nbytes, Device device, bool owned);
  void* data_ = nullptr;
  size_t nbytes_ = 0;
  Device device_;
  bool owned_ = true;
};

class Tensor {
 public:
  Tensor() = default;  // undefined()

  // Zero-filled CPU tensor.
  static Tensor zeros(const Shape& shape, DType dtype);
  // CPU tensor whose contents are left as the allocator gives them: for a
  // buffer that a kernel or collective fills entirely before it is read
  // (filling megabytes with zeros first costs as much as the fill itself).
  static Tensor uninitialized(const Shape& shape, DType dtype);
  // Uninitialized (zeroed on the CPU) tensor on any device.
  static absl::StatusOr<Tensor> empty(const Shape& shape, DType dtype,
                                      Device device);
  template <typename T>
  static Tensor from_vector(const std::vector<T>& values, Shape shape = {});
  // A tensor over caller-owned memory (not freed by the tensor).
  static Tensor from_blob(void* data, const Shape& shape, DType dtype,
                          Device device = Device::cpu());

  bool defined() const { return storage_ != nullptr; }
  DType dtype() const { return dtype_; }
  Device device() const { return storage_ ? storage_->device() : Device::cpu(); }
  const Shape& shape() const { return shape_; }
  int64_t dim() const { return static_cast<int64_t>(shape_.size()); }
  int64_t size(int d) const { return shape_[d]; }
  int64_t numel() const { return numel_; }
  size_t element_size() const { return dtype_size(dtype_); }
  size_t nbytes() const { return static_cast<size_t>(numel_) * element_size(); }
  // Offset, in elements, of this view into its storage.
  int64_t storage_offset() const { return offset_; }
  const std::shared_ptr<Storage>& storage() const { return storage_; }

  void* data() const;
  // Typed access; aborts with a message if T does not match dtype().
  template <typename T>
  T* data_as() const;

  // A view of `numel(shape)` elements starting `offset` elements into this
  // (flattened) tensor; shares storage. Aborts if out of range.
  Tensor view(int64_t offset, const Shape& shape) const;
  // Same elements, new shape (numel must match); shares storage.
  Tensor reshape(const Shape& shape) const;
  Tensor flatten() const { return reshape({numel_}); }
  // A new tensor with its own storage holding a copy of this one's bytes.
  Tensor clone() const;

  // Copies `src` into this tensor. Errors (naming expected vs. got) on dtype
  // or element-count mismatch. Works across devices when an allocator is
  // registered for the non-CPU side.
  absl::Status copy_from(const Tensor& src) const;
  void zero_() const;
  // Sets every element to `value` (CPU only).
  void fill_(double value) const;
  // Element i as double (CPU only; for tests and debugging).
  double item(int64_t i) const;
  // Elements as a vector of float (CPU only; any floating/integer dtype).
  std::vector<float> to_float_vector() const;

  bool shares_storage_with(const Tensor& other) const {
    return storage_ && storage_ == other.storage_;
  }
  // "float32[3, 4] on cpu".
  std::string str() const;

 private:
  Tensor(std::shared_ptr<Storage> storage, int64_t offset, Shape shape,
         DType dtype);
  [[noreturn]] static void fail(const std::string& message);
  // zeros() and uninitialized(); `what` names the caller in the error.
  static Tensor cpu(const char* what, const Shape& shape, DType dtype, bool zeroed);

  std::shared_ptr<Storage> storage_;
  int64_t offset_ = 0;
  Shape shape_;
  int64_t numel_ = 0;
  DType dtype_ = DType::kFloat32;
};

// Checks used at API boundaries; each error says what was expected and what
// came, prefixed by `what` (e.g. "allreduce: tensor 2").
absl::Status check_dtype(const Tensor& t, DType expected, const std::string& what);
absl::Status check_numel(const Tensor& t, int64_t expected, const std::string& what);
absl::Status check_device(const Tensor& t, Device expected, const std::string& what);
absl::Status check_same_layout(const Tensor& t, const Tensor& like,
                               const std::string& what);

template <typename T>
Tensor Tensor::from_vector(const std::vector<T>& values, Shape shape) {
  if (shape.empty()) shape = {static_cast<int64_t>(values.size())};
  Tensor t = zeros(shape, DTypeOf<T>::value);
  if (shape_numel(shape) != static_cast<int64_t>(values.size())) {
    fail("from_vector: shape " + shape_str(shape) + " does not hold " +
         std::to_string(values.size()) + " values");
  }
  if (!values.empty()) memcpy(t.data(), values.data(), values.size() * sizeof(T));
  return t;
}

template <typename T>
T* Tensor::data_as() const {
  if (DTypeOf<T>::value != dtype_) {
    fail(std::string("data_as: tensor is ") + dtype_name(dtype_) +
         " but was read as " + dtype_name(DTypeOf<T>::value));
  }
  return static_cast<T*>(data());
}

}  // namespace ddpx

#endif  // DDPX_CORE_TENSOR_H_
