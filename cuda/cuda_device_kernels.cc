// DeviceKernels for CUDA tensors: the kernels of kernels.h and cuBLAS GEMMs
// on the current stream of the tensors' device. Registered when linked.
// ByteGrad's quantize_divided and dequantize_sum are DeviceKernels'
// defaults (divide, then quantize; zero, then decode-and-add per record).
#include <map>
#include <memory>
#include <mutex>

#include "cuda/check.h"
#include "cuda/cublas_gemm.h"
#include "cuda/device_kernels.h"
#include "cuda/kernels.h"
#include "cuda/stream.h"

namespace ddpx {
namespace {

absl::Status not_cuda(const Tensor& t, const char* what) {
  return absl::InvalidArgumentError(std::string(what) + ": CUDA kernels got " + t.str());
}

class CudaDeviceKernels : public DeviceKernels {
 public:
  absl::Status cast(const Tensor& src, const Tensor& dst) override {
    if (absl::Status s = check_cast(src, dst); !s.ok()) return s;
    if (!src.device().is_cuda()) return not_cuda(src, "cast");
    DeviceGuard guard(src.device().index);
    if (!guard.status().ok()) return guard.status();
    cudaStream_t stream = current_stream(src.device().index);
    const int64_t n = src.numel();
    if (src.dtype() == DType::kFloat32) {
      float* in = static_cast<float*>(src.data());
      uint16_t* out = static_cast<uint16_t*>(dst.data());
      return DDPX_CUDA_CHECK(dst.dtype() == DType::kFloat16
                                 ? cuda_kernels::cast_float_to_half(in, out, n, stream)
                                 : cuda_kernels::cast_float_to_bfloat16(in, out, n, stream));
    }
    uint16_t* in = static_cast<uint16_t*>(src.data());
    float* out = static_cast<float*>(dst.data());
    return DDPX_CUDA_CHECK(src.dtype() == DType::kFloat16
                               ? cuda_kernels::cast_half_to_float(in, out, n, stream)
                               : cuda_kernels::cast_bfloat16_to_float(in, out, n, stream));
  }

  absl::Status quantize_minmax(const Tensor& src, int64_t chunk, const Tensor& dst) override {
    if (absl::Status s = check_quantize(src, chunk, dst); !s.ok()) return s;
    if (!src.device().is_cuda()) return not_cuda(src, "quantize");
    DeviceGuard guard(src.device().index);
    if (!guard.status().ok()) return guard.status();
    return DDPX_CUDA_CHECK(cuda_kernels::quantize_minmax(
        static_cast<const float*>(src.data()), src.numel(), chunk,
        static_cast<uint8_t*>(dst.data()), current_stream(src.device().index)));
  }

  absl::Status dequantize_minmax(const Tensor& src, int64_t chunk, const Tensor& dst,
                                 bool accumulate) override {
    if (absl::Status s = check_dequantize(src, chunk, dst); !s.ok()) return s;
    if (!src.device().is_cuda()) return not_cuda(src, "dequantize");
    DeviceGuard guard(src.device().index);
    if (!guard.status().ok()) return guard.status();
    return DDPX_CUDA_CHECK(cuda_kernels::dequantize_minmax(
        static_cast<const uint8_t*>(src.data()), dst.numel(), chunk,
        static_cast<float*>(dst.data()), accumulate, current_stream(src.device().index)));
  }

  absl::Status orthogonalize(const Tensor& matrices, float epsilon) override {
    absl::StatusOr<MatrixBatch> shape = check_matrices(matrices, "orthogonalize");
    if (!shape.ok()) return shape.status();
    if (!matrices.device().is_cuda()) return not_cuda(matrices, "orthogonalize");
    DeviceGuard guard(matrices.device().index);
    if (!guard.status().ok()) return guard.status();
    return DDPX_CUDA_CHECK(cuda_kernels::orthogonalize_gram_schmidt(
        static_cast<float*>(matrices.data()), static_cast<int>(shape->batch), shape->rows,
        static_cast<int>(shape->cols), epsilon, current_stream(matrices.device().index)));
  }

  absl::Status matmul(const Tensor& a, bool transpose_a, const Tensor& b, bool transpose_b,
                      const Tensor& c) override {
    absl::StatusOr<MatmulShape> shape = check_matmul(a, transpose_a, b, transpose_b, c);
    if (!shape.ok()) return shape.status();
    if (!a.device().is_cuda()) return not_cuda(a, "matmul");
    const int device = a.device().index;
    DeviceGuard guard(device);
    if (!guard.status().ok()) return guard.status();
    // One handle per device, used under a lock: a cuBLAS handle must not be
    // driven from two threads at once.
    std::lock_guard<std::mutex> lock(mu_);
    auto it = handles_.find(device);
    if (it == handles_.end()) {
      absl::StatusOr<CublasHandle> h = CublasHandle::create(device);
      if (!h.ok()) return h.status();
      it = handles_.emplace(device, std::move(*h)).first;
    }
    return gemm_row_major(it->second.get(), current_stream(device), transpose_a, transpose_b,
                          shape->batch, shape->m, shape->n, shape->k,
                          static_cast<const float*>(a.data()),
                          static_cast<const float*>(b.data()), static_cast<float*>(c.data()));
  }

  absl::Status add_scaled(const Tensor& a, float alpha, const Tensor& b,
                          const Tensor& out) override {
    if (absl::Status s = check_elementwise("add_scaled", a, b, true); !s.ok()) return s;
    if (absl::Status s = check_elementwise("add_scaled: out", a, out, true); !s.ok()) return s;
    if (!a.device().is_cuda()) return not_cuda(a, "add_scaled");
    DeviceGuard guard(a.device().index);
    if (!guard.status().ok()) return guard.status();
    return DDPX_CUDA_CHECK(cuda_kernels::add_scaled(
        static_cast<const float*>(a.data()), alpha, static_cast<const float*>(b.data()),
        static_cast<float*>(out.data()), a.numel(), current_stream(a.device().index)));
  }

  absl::Status divide(const Tensor& x, float divisor) override {
    if (absl::Status s = check_elementwise("divide", x, Tensor(), false); !s.ok()) return s;
    if (!x.device().is_cuda()) return not_cuda(x, "divide");
    if (x.dtype() == DType::kFloat16 || x.dtype() == DType::kBFloat16) {
      return divide_16bit_in_float32(x, divisor);
    }
    if (absl::Status s = check_dtype(x, DType::kFloat32, "divide on a device"); !s.ok()) return s;
    DeviceGuard guard(x.device().index);
    if (!guard.status().ok()) return guard.status();
    return DDPX_CUDA_CHECK(cuda_kernels::divide(static_cast<float*>(x.data()), divisor,
                                                x.numel(), current_stream(x.device().index)));
  }

  absl::Status fill(const Tensor& x, float value) override {
    if (absl::Status s = check_elementwise("fill", x, Tensor(), true); !s.ok()) return s;
    if (!x.device().is_cuda()) return not_cuda(x, "fill");
    DeviceGuard guard(x.device().index);
    if (!guard.status().ok()) return guard.status();
    return DDPX_CUDA_CHECK(cuda_kernels::fill(static_cast<float*>(x.data()), value,
                                              x.numel(), current_stream(x.device().index)));
  }

  absl::Status zero(const Tensor& x) override {
    if (absl::Status s = check_elementwise("zero", x, Tensor(), false); !s.ok()) return s;
    if (!x.device().is_cuda()) return not_cuda(x, "zero");
    if (x.nbytes() == 0) return absl::OkStatus();
    DeviceGuard guard(x.device().index);
    if (!guard.status().ok()) return guard.status();
    return DDPX_CUDA_CHECK(
        cudaMemsetAsync(x.data(), 0, x.nbytes(), current_stream(x.device().index)));
  }

  absl::Status copy(const Tensor& src, const Tensor& dst) override {
    if (absl::Status s = check_elementwise("copy", src, dst, false); !s.ok()) return s;
    if (!src.device().is_cuda()) return not_cuda(src, "copy");
    if (src.nbytes() == 0) return absl::OkStatus();
    DeviceGuard guard(src.device().index);
    if (!guard.status().ok()) return guard.status();
    return DDPX_CUDA_CHECK(cudaMemcpyAsync(dst.data(), src.data(), src.nbytes(),
                                           cudaMemcpyDeviceToDevice,
                                           current_stream(src.device().index)));
  }

  absl::Status synchronize(Device device) override {
    if (!device.is_cuda()) return absl::OkStatus();
    DeviceGuard guard(device.index);
    if (!guard.status().ok()) return guard.status();
    return DDPX_CUDA_CHECK(cudaStreamSynchronize(current_stream(device.index)));
  }

 private:
  std::mutex mu_;
  std::map<int, CublasHandle> handles_;
};

const bool registered = [] {
  static CudaDeviceKernels* kernels = new CudaDeviceKernels();
  register_device_kernels(Device::Type::kCUDA, kernels);
  return true;
}();

}  // namespace
}  // namespace ddpx
