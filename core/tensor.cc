#include "core/tensor.h"

#include <array>
#include <cstdio>
#include <mutex>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"

namespace ddpx {
namespace {

std::array<DeviceAllocator*, 2>& allocators() {
  static std::array<DeviceAllocator*, 2> table{};
  return table;
}
std::mutex& allocators_mu() {
  static std::mutex mu;
  return mu;
}

constexpr size_t kCpuAlignment = 64;

template <typename T>
void fill_typed(void* data, int64_t n, double value) {
  T* p = static_cast<T*>(data);
  T v = static_cast<T>(static_cast<float>(value));
  for (int64_t i = 0; i < n; ++i) p[i] = v;
}

template <typename T>
double read_typed(const void* data, int64_t i) {
  return static_cast<double>(static_cast<float>(static_cast<const T*>(data)[i]));
}

}  // namespace

int64_t shape_numel(const Shape& shape) {
  int64_t n = 1;
  for (int64_t d : shape) n *= d;
  return n;
}

std::string shape_str(const Shape& shape) {
  return absl::StrCat("[", absl::StrJoin(shape, ", "), "]");
}

void register_device_allocator(Device::Type type, DeviceAllocator* allocator) {
  std::lock_guard<std::mutex> lock(allocators_mu());
  allocators()[static_cast<size_t>(type)] = allocator;
}

DeviceAllocator* device_allocator(Device::Type type) {
  std::lock_guard<std::mutex> lock(allocators_mu());
  return allocators()[static_cast<size_t>(type)];
}

Storage::Storage(size_t nbytes, bool zeroed) : nbytes_(nbytes), device_(Device::cpu()) {
  size_t rounded = (nbytes + kCpuAlignment - 1) / kCpuAlignment * kCpuAlignment;
  data_ = std::aligned_alloc(kCpuAlignment, rounded == 0 ? kCpuAlignment : rounded);
  if (data_ == nullptr) {
    fprintf(stderr, "ddpx: out of memory allocating %zu bytes\n", nbytes);
    abort();
  }
  if (zeroed) memset(data_, 0, nbytes);
}

Storage::Storage(void* data, size_t nbytes, Device device, bool owned)
    : data_(data), nbytes_(nbytes), device_(device), owned_(owned) {}

absl::StatusOr<std::shared_ptr<Storage>> Storage::allocate(size_t nbytes,
                                                           Device device) {
  if (device.is_cpu()) return std::make_shared<Storage>(nbytes);
  DeviceAllocator* alloc = device_allocator(device.type);
  if (alloc == nullptr) {
    return absl::FailedPreconditionError(absl::StrCat(
        "cannot allocate on ", device.str(),
        ": this build has no allocator for it (build with --config=cuda)"));
  }
  absl::StatusOr<void*> ptr = alloc->allocate(nbytes, device.index);
  if (!ptr.ok()) return ptr.status();
  return std::shared_ptr<Storage>(new Storage(*ptr, nbytes, device, true));
}

std::shared_ptr<Storage> Storage::borrow(void* data, size_t nbytes, Device device) {
  return std::shared_ptr<Storage>(new Storage(data, nbytes, device, false));
}

Storage::~Storage() {
  if (!owned_ || data_ == nullptr) return;
  if (device_.is_cpu()) {
    std::free(data_);
  } else if (DeviceAllocator* alloc = device_allocator(device_.type)) {
    alloc->deallocate(data_, nbytes_, device_.index);
  }
}

Tensor::Tensor(std::shared_ptr<Storage> storage, int64_t offset, Shape shape,
               DType dtype)
    : storage_(std::move(storage)),
      offset_(offset),
      shape_(std::move(shape)),
      numel_(shape_numel(shape_)),
      dtype_(dtype) {}

void Tensor::fail(const std::string& message) {
  fprintf(stderr, "ddpx::Tensor: %s\n", message.c_str());
  abort();
}

Tensor Tensor::cpu(const char* what, const Shape& shape, DType dtype, bool zeroed) {
  for (int64_t d : shape)
    if (d < 0) fail(std::string(what) + ": negative dimension in shape " + shape_str(shape));
  size_t nbytes = static_cast<size_t>(shape_numel(shape)) * dtype_size(dtype);
  return Tensor(std::make_shared<Storage>(nbytes, zeroed), 0, shape, dtype);
}

Tensor Tensor::zeros(const Shape& shape, DType dtype) {
  return cpu("zeros", shape, dtype, /*zeroed=*/true);
}

Tensor Tensor::uninitialized(const Shape& shape, DType dtype) {
  return cpu("uninitialized", shape, dtype, /*zeroed=*/false);
}

absl::StatusOr<Tensor> Tensor::empty(const Shape& shape, DType dtype,
                                     Device device) {
  for (int64_t d : shape) {
    if (d < 0) {
      return absl::InvalidArgumentError("negative dimension in shape " +
                                        shape_str(shape));
    }
  }
  size_t nbytes = static_cast<size_t>(shape_numel(shape)) * dtype_size(dtype);
  absl::StatusOr<std::shared_ptr<Storage>> storage = Storage::allocate(nbytes, device);
  if (!storage.ok()) return storage.status();
  return Tensor(std::move(*storage), 0, shape, dtype);
}

Tensor Tensor::from_blob(void* data, const Shape& shape, DType dtype,
                         Device device) {
  size_t nbytes = static_cast<size_t>(shape_numel(shape)) * dtype_size(dtype);
  return Tensor(Storage::borrow(data, nbytes, device), 0, shape, dtype);
}

void* Tensor::data() const {
  if (!storage_) return nullptr;
  return static_cast<char*>(storage_->data()) + offset_ * element_size();
}

Tensor Tensor::view(int64_t offset, const Shape& shape) const {
  int64_t n = shape_numel(shape);
  if (offset < 0 || n < 0 || offset + n > numel_) {
    fail(absl::StrCat("view: ", n, " elements at offset ", offset,
                      " do not fit in ", str()));
  }
  return Tensor(storage_, offset_ + offset, shape, dtype_);
}

Tensor Tensor::reshape(const Shape& shape) const {
  if (shape_numel(shape) != numel_) {
    fail(absl::StrCat("reshape: ", str(), " cannot become shape ",
                      shape_str(shape)));
  }
  return Tensor(storage_, offset_, shape, dtype_);
}

Tensor Tensor::clone() const {
  absl::StatusOr<Tensor> out = empty(shape_, dtype_, device());
  if (!out.ok()) fail(std::string(out.status().message()));
  absl::Status s = out->copy_from(*this);
  if (!s.ok()) fail(std::string(s.message()));
  return *out;
}

absl::Status Tensor::copy_from(const Tensor& src) const {
  if (absl::Status s = check_dtype(src, dtype_, "copy_from: source"); !s.ok()) return s;
  if (absl::Status s = check_numel(src, numel_, "copy_from: source"); !s.ok()) return s;
  if (nbytes() == 0 || data() == src.data()) return absl::OkStatus();
  if (device().is_cpu() && src.device().is_cpu()) {
    memmove(data(), src.data(), nbytes());
    return absl::OkStatus();
  }
  Device other = device().is_cpu() ? src.device() : device();
  DeviceAllocator* alloc = device_allocator(other.type);
  if (alloc == nullptr) {
    return absl::FailedPreconditionError("copy_from: no allocator for " + other.str());
  }
  return alloc->copy(data(), device(), src.data(), src.device(), nbytes());
}

void Tensor::zero_() const {
  if (nbytes() == 0) return;
  if (device().is_cpu()) {
    memset(data(), 0, nbytes());
    return;
  }
  Tensor zeros_on_host = Tensor::zeros(shape_, dtype_);
  absl::Status s = copy_from(zeros_on_host);
  if (!s.ok()) fail(std::string(s.message()));
}

void Tensor::fill_(double value) const {
  if (!device().is_cpu()) fail("fill_: CPU tensors only, got " + str());
  switch (dtype_) {
    case DType::kFloat32: fill_typed<float>(data(), numel_, value); break;
    case DType::kFloat64: fill_typed<double>(data(), numel_, value); break;
    case DType::kFloat16: fill_typed<Half>(data(), numel_, value); break;
    case DType::kBFloat16: fill_typed<BFloat16>(data(), numel_, value); break;
    case DType::kInt8: fill_typed<int8_t>(data(), numel_, value); break;
    case DType::kUInt8: fill_typed<uint8_t>(data(), numel_, value); break;
    case DType::kInt32: fill_typed<int32_t>(data(), numel_, value); break;
    case DType::kInt64: fill_typed<int64_t>(data(), numel_, value); break;
  }
}

double Tensor::item(int64_t i) const {
  if (!device().is_cpu()) fail("item: CPU tensors only, got " + str());
  if (i < 0 || i >= numel_) fail(absl::StrCat("item: index ", i, " out of range for ", str()));
  switch (dtype_) {
    case DType::kFloat32: return read_typed<float>(data(), i);
    case DType::kFloat64: return static_cast<const double*>(data())[i];
    case DType::kFloat16: return read_typed<Half>(data(), i);
    case DType::kBFloat16: return read_typed<BFloat16>(data(), i);
    case DType::kInt8: return static_cast<const int8_t*>(data())[i];
    case DType::kUInt8: return static_cast<const uint8_t*>(data())[i];
    case DType::kInt32: return static_cast<const int32_t*>(data())[i];
    case DType::kInt64: return static_cast<double>(static_cast<const int64_t*>(data())[i]);
  }
  return 0;
}

std::vector<float> Tensor::to_float_vector() const {
  std::vector<float> out(static_cast<size_t>(numel_));
  for (int64_t i = 0; i < numel_; ++i) out[i] = static_cast<float>(item(i));
  return out;
}

std::string Tensor::str() const {
  if (!defined()) return "undefined tensor";
  return absl::StrCat(dtype_name(dtype_), shape_str(shape_), " on ", device().str());
}

absl::Status check_dtype(const Tensor& t, DType expected, const std::string& what) {
  if (t.dtype() == expected) return absl::OkStatus();
  return absl::InvalidArgumentError(absl::StrCat(
      what, ": expected dtype ", dtype_name(expected), ", got ", t.str()));
}

absl::Status check_numel(const Tensor& t, int64_t expected, const std::string& what) {
  if (t.numel() == expected) return absl::OkStatus();
  return absl::InvalidArgumentError(absl::StrCat(
      what, ": expected ", expected, " elements, got ", t.numel(), " (", t.str(), ")"));
}

absl::Status check_device(const Tensor& t, Device expected, const std::string& what) {
  if (t.device() == expected) return absl::OkStatus();
  return absl::InvalidArgumentError(absl::StrCat(
      what, ": expected a tensor on ", expected.str(), ", got ", t.str()));
}

absl::Status check_same_layout(const Tensor& t, const Tensor& like,
                               const std::string& what) {
  if (absl::Status s = check_dtype(t, like.dtype(), what); !s.ok()) return s;
  if (absl::Status s = check_numel(t, like.numel(), what); !s.ok()) return s;
  return check_device(t, like.device(), what);
}

}  // namespace ddpx
