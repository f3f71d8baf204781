// Devices, streams and events with their CUDA calls checked.
//
// The "current stream" is per thread and per device, as in torch: kernels
// and copies made on behalf of the caller go to it, and the NCCL backend
// makes it wait for (and its own stream wait on) collectives. It is the
// legacy default stream until a StreamGuard says otherwise.
#ifndef DDPX_CUDA_STREAM_H_
#define DDPX_CUDA_STREAM_H_

#include <cuda_runtime_api.h>

#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"

namespace ddpx {

// Number of visible CUDA devices; 0 (not an error) when there is no device
// or no driver.
int cuda_device_count();
// Why CUDA cannot run here ("cudaGetDeviceCount: cudaErrorNoDevice (...)"),
// or "" when at least one device is present. GPU tests skip with this text.
std::string cuda_unavailable_reason();

// Makes `device` current for the guard's lifetime, then restores the one
// that was current before.
class DeviceGuard {
 public:
  explicit DeviceGuard(int device);
  ~DeviceGuard();
  DeviceGuard(const DeviceGuard&) = delete;
  DeviceGuard& operator=(const DeviceGuard&) = delete;
  // Whether switching worked; check before launching anything.
  const absl::Status& status() const { return status_; }

 private:
  int previous_ = -1;
  absl::Status status_;
};

cudaStream_t current_stream(int device);

// Sets the thread's current stream of `device` for the guard's lifetime.
class StreamGuard {
 public:
  StreamGuard(int device, cudaStream_t stream);
  ~StreamGuard();
  StreamGuard(const StreamGuard&) = delete;
  StreamGuard& operator=(const StreamGuard&) = delete;

 private:
  int device_;
  cudaStream_t previous_;
};

// An owned non-blocking stream on one device.
class CudaStream {
 public:
  // priority: 0 is normal; lower numbers are higher priority (CUDA's rule).
  static absl::StatusOr<CudaStream> create(int device, int priority = 0);
  CudaStream() = default;
  CudaStream(CudaStream&& other) noexcept;
  CudaStream& operator=(CudaStream&& other) noexcept;
  ~CudaStream();

  cudaStream_t get() const { return stream_; }
  int device() const { return device_; }
  absl::Status synchronize() const;

 private:
  cudaStream_t stream_ = nullptr;
  int device_ = -1;
};

// An owned event (timing off: only ordering and completion are needed).
class CudaEvent {
 public:
  static absl::StatusOr<CudaEvent> create(int device);
  CudaEvent() = default;
  CudaEvent(CudaEvent&& other) noexcept;
  CudaEvent& operator=(CudaEvent&& other) noexcept;
  ~CudaEvent();

  cudaEvent_t get() const { return event_; }
  absl::Status record(cudaStream_t stream);
  // Makes `stream` wait for this event without blocking the host.
  absl::Status block(cudaStream_t stream) const;
  // True once the recorded work is done; an error if it failed.
  absl::StatusOr<bool> query() const;
  absl::Status synchronize() const;

 private:
  cudaEvent_t event_ = nullptr;
  int device_ = -1;
};

}  // namespace ddpx

#endif  // DDPX_CUDA_STREAM_H_
