#include "cuda/stream.h"

#include <map>
#include <utility>

#include "cuda/check.h"

namespace ddpx {
namespace {

std::map<int, cudaStream_t>& thread_current_streams() {
  thread_local std::map<int, cudaStream_t> streams;
  return streams;
}

}  // namespace

int cuda_device_count() {
  int count = 0;
  if (cudaGetDeviceCount(&count) != cudaSuccess) {
    cudaGetLastError();  // clear it; "no device" is an answer, not a failure
    return 0;
  }
  return count;
}

std::string cuda_unavailable_reason() {
  int count = 0;
  cudaError_t error = cudaGetDeviceCount(&count);
  if (error != cudaSuccess) {
    cudaGetLastError();
    return std::string("cudaGetDeviceCount returned ") + cudaGetErrorName(error) + " (" +
           cudaGetErrorString(error) + ")";
  }
  if (count == 0) return "cudaGetDeviceCount reports 0 devices";
  return "";
}

DeviceGuard::DeviceGuard(int device) {
  status_ = DDPX_CUDA_CHECK(cudaGetDevice(&previous_));
  if (status_.ok() && previous_ != device) status_ = DDPX_CUDA_CHECK(cudaSetDevice(device));
}

DeviceGuard::~DeviceGuard() {
  if (previous_ >= 0) cudaSetDevice(previous_);
}

cudaStream_t current_stream(int device) {
  auto& streams = thread_current_streams();
  auto it = streams.find(device);
  return it == streams.end() ? nullptr : it->second;
}

StreamGuard::StreamGuard(int device, cudaStream_t stream)
    : device_(device), previous_(current_stream(device)) {
  thread_current_streams()[device] = stream;
}

StreamGuard::~StreamGuard() { thread_current_streams()[device_] = previous_; }

absl::StatusOr<CudaStream> CudaStream::create(int device, int priority) {
  DeviceGuard guard(device);
  if (!guard.status().ok()) return guard.status();
  CudaStream s;
  DDPX_CUDA_RETURN_IF_ERROR(
      cudaStreamCreateWithPriority(&s.stream_, cudaStreamNonBlocking, priority));
  s.device_ = device;
  return s;
}

CudaStream::CudaStream(CudaStream&& other) noexcept
    : stream_(std::exchange(other.stream_, nullptr)), device_(other.device_) {}

CudaStream& CudaStream::operator=(CudaStream&& other) noexcept {
  std::swap(stream_, other.stream_);
  std::swap(device_, other.device_);
  return *this;
}

CudaStream::~CudaStream() {
  if (stream_ != nullptr) cudaStreamDestroy(stream_);
}

absl::Status CudaStream::synchronize() const {
  return DDPX_CUDA_CHECK(cudaStreamSynchronize(stream_));
}

absl::StatusOr<CudaEvent> CudaEvent::create(int device) {
  DeviceGuard guard(device);
  if (!guard.status().ok()) return guard.status();
  CudaEvent e;
  DDPX_CUDA_RETURN_IF_ERROR(cudaEventCreateWithFlags(&e.event_, cudaEventDisableTiming));
  e.device_ = device;
  return e;
}

CudaEvent::CudaEvent(CudaEvent&& other) noexcept
    : event_(std::exchange(other.event_, nullptr)), device_(other.device_) {}

CudaEvent& CudaEvent::operator=(CudaEvent&& other) noexcept {
  std::swap(event_, other.event_);
  std::swap(device_, other.device_);
  return *this;
}

CudaEvent::~CudaEvent() {
  if (event_ != nullptr) cudaEventDestroy(event_);
}

absl::Status CudaEvent::record(cudaStream_t stream) {
  DeviceGuard guard(device_);
  if (!guard.status().ok()) return guard.status();
  return DDPX_CUDA_CHECK(cudaEventRecord(event_, stream));
}

absl::Status CudaEvent::block(cudaStream_t stream) const {
  return DDPX_CUDA_CHECK(cudaStreamWaitEvent(stream, event_, 0));
}

absl::StatusOr<bool> CudaEvent::query() const {
  cudaError_t e = cudaEventQuery(event_);
  if (e == cudaSuccess) return true;
  if (e == cudaErrorNotReady) {
    cudaGetLastError();
    return false;
  }
  return DDPX_CUDA_CHECK(e);
}

absl::Status CudaEvent::synchronize() const {
  return DDPX_CUDA_CHECK(cudaEventSynchronize(event_));
}

}  // namespace ddpx
