#include "hooks/host_kernels.h"

#include <algorithm>
#include <cstring>
#include <vector>

#include "absl/strings/str_cat.h"
#include "core/half.h"
#include "cuda/elementwise_math.h"
#include "cuda/quantize_math.h"
#include "hooks/kernels/cpu_kernels.h"
#include "hooks/powersgd_kernels.h"
#include "hooks/powersgd_orthogonalize.h"

namespace ddpx {
namespace {

absl::Status on_cpu(const Tensor& t, const char* what) {
  if (t.device().is_cpu()) return absl::OkStatus();
  return absl::InvalidArgumentError(absl::StrCat(what, ": host kernels got ", t.str()));
}

uint16_t* bits(const Tensor& t) { return static_cast<uint16_t*>(t.data()); }
uint8_t* bytes(const Tensor& t) { return static_cast<uint8_t*>(t.data()); }

// dst = src / divisor in dst's 16-bit dtype, or src widened into float32 dst.
void convert(const Tensor& src, const Tensor& dst, float divisor) {
  const int64_t n = src.numel();
  if (src.dtype() == DType::kFloat32) {
    if (dst.dtype() == DType::kFloat16) {
      kernels::float_to_half(src.data_as<float>(), bits(dst), n, divisor);
    } else {
      kernels::float_to_bfloat16(src.data_as<float>(), bits(dst), n, divisor);
    }
  } else if (src.dtype() == DType::kFloat16) {
    kernels::half_to_float(bits(src), dst.data_as<float>(), n);
  } else {
    kernels::bfloat16_to_float(bits(src), dst.data_as<float>(), n);
  }
}

// The shapes add_then_matmul and matmul_then_subtract take: one batch size,
// M (or OUT) rows x cols, and factors of one rank.
struct FactorShape {
  int64_t batch, rows, cols, rank;
};

absl::StatusOr<FactorShape> factor_shape(const char* what, const Tensor& matrix,
                                         const Tensor& rows_factor, const Tensor& cols_factor) {
  absl::StatusOr<MatmulShape> s = check_matmul(rows_factor, false, cols_factor, true, matrix);
  if (!s.ok()) {
    return absl::Status(s.status().code(), absl::StrCat(what, ": ", s.status().message()));
  }
  if (absl::Status c = on_cpu(matrix, what); !c.ok()) return c;
  return FactorShape{s->batch, s->m, s->n, s->k};
}

}  // namespace

absl::Status HostKernels::cast(const Tensor& src, const Tensor& dst) {
  return cast_scaled(src, 1.0f, dst);
}

absl::Status HostKernels::cast_scaled(const Tensor& src, float divisor, const Tensor& dst) {
  if (absl::Status s = check_cast(src, dst); !s.ok()) return s;
  if (absl::Status s = on_cpu(src, "cast"); !s.ok()) return s;
  if (divisor != 1.0f && src.dtype() != DType::kFloat32) {
    return absl::InvalidArgumentError("cast_scaled: divides float32 on its way down only");
  }
  convert(src, dst, divisor);
  return absl::OkStatus();
}

absl::Status HostKernels::quantize_minmax(const Tensor& src, int64_t chunk, const Tensor& dst) {
  if (absl::Status s = check_quantize(src, chunk, dst); !s.ok()) return s;
  if (absl::Status s = on_cpu(src, "quantize"); !s.ok()) return s;
  const int64_t n = src.numel();
  for (int64_t r = 0; r < cuda_math::quantized_records(n, chunk); ++r) {
    kernels::quantize(src.data_as<float>() + r * chunk, cuda_math::record_elems(r, n, chunk),
                      bytes(dst) + cuda_math::record_offset(r, chunk));
  }
  return absl::OkStatus();
}

absl::Status HostKernels::dequantize_minmax(const Tensor& src, int64_t chunk, const Tensor& dst,
                                            bool accumulate) {
  if (absl::Status s = check_dequantize(src, chunk, dst); !s.ok()) return s;
  if (absl::Status s = on_cpu(src, "dequantize"); !s.ok()) return s;
  const int64_t n = dst.numel();
  for (int64_t r = 0; r < cuda_math::quantized_records(n, chunk); ++r) {
    const uint8_t* record = bytes(src) + cuda_math::record_offset(r, chunk);
    float* out = dst.data_as<float>() + r * chunk;
    const int64_t len = cuda_math::record_elems(r, n, chunk);
    if (accumulate) {
      kernels::dequantize_add(record, len, out);
    } else {
      kernels::dequantize(record, len, out);
    }
  }
  return absl::OkStatus();
}

absl::Status HostKernels::quantize_divided(const Tensor& src, float divisor, const Tensor& dst) {
  if (absl::Status s = check_quantize_divided(src, divisor, dst); !s.ok()) return s;
  if (absl::Status s = on_cpu(src, "quantize_divided"); !s.ok()) return s;
  const int64_t n = src.numel();
  kernels::quantize_divided(src.data_as<float>(), n, divisor, bytes(dst));
  const int64_t used = cuda_math::kQuantizedHeaderBytes + n;
  std::fill(bytes(dst) + used, bytes(dst) + dst.numel(), uint8_t{0});
  return absl::OkStatus();
}

absl::Status HostKernels::dequantize_sum(const Tensor& records, int count, int64_t stride,
                                         const Tensor& dst) {
  if (absl::Status s = check_dequantize_sum(records, count, stride, dst); !s.ok()) return s;
  if (absl::Status s = on_cpu(dst, "dequantize_sum"); !s.ok()) return s;
  std::vector<const uint8_t*> each(static_cast<size_t>(count));
  for (int i = 0; i < count; ++i) each[i] = bytes(records) + i * stride;
  kernels::dequantize_sum(each.data(), count, dst.numel(), dst.data_as<float>());
  return absl::OkStatus();
}

absl::Status HostKernels::orthogonalize(const Tensor& matrices, float epsilon) {
  return orthogonalize_counting(matrices, epsilon).status();
}

absl::StatusOr<int> HostKernels::orthogonalize_counting(const Tensor& matrices, float epsilon) {
  absl::StatusOr<MatrixBatch> shape = check_matrices(matrices, "orthogonalize");
  if (!shape.ok()) return shape.status();
  if (absl::Status s = on_cpu(matrices, "orthogonalize"); !s.ok()) return s;
  int zero_columns = 0;
  float* data = matrices.data_as<float>();
  for (int64_t b = 0; b < shape->batch; ++b) {
    zero_columns += orthogonalize_columns(data + b * shape->rows * shape->cols, shape->rows,
                                          shape->cols, epsilon);
  }
  return zero_columns;
}

absl::Status HostKernels::matmul(const Tensor& a, bool transpose_a, const Tensor& b,
                                 bool transpose_b, const Tensor& c) {
  absl::StatusOr<MatmulShape> shape = check_matmul(a, transpose_a, b, transpose_b, c);
  if (!shape.ok()) return shape.status();
  if (absl::Status s = on_cpu(a, "matmul"); !s.ok()) return s;
  const int64_t m = shape->m, n = shape->n, k = shape->k;
  for (int64_t batch = 0; batch < shape->batch; ++batch) {
    const float* pa = a.data_as<float>() + batch * m * k;
    const float* pb = b.data_as<float>() + batch * k * n;
    float* pc = c.data_as<float>() + batch * m * n;
    if (!transpose_a && !transpose_b) {
      matmul_m_q(pa, m, k, pb, n, pc);  // [m, k] [k, n]
    } else if (transpose_a && !transpose_b) {
      matmul_mt_p(pa, k, m, pb, n, pc);  // [k, m]^T [k, n]
    } else if (!transpose_a && transpose_b) {
      matmul_p_qt(pa, pb, m, n, k, pc);  // [m, k] [n, k]^T
    } else {
      for (int64_t i = 0; i < m; ++i) {
        for (int64_t j = 0; j < n; ++j) {
          float sum = 0;
          for (int64_t l = 0; l < k; ++l) sum += pa[l * m + i] * pb[j * k + l];
          pc[i * n + j] = sum;
        }
      }
    }
  }
  return absl::OkStatus();
}

absl::Status HostKernels::add_then_matmul(const Tensor& m, const Tensor& input, const Tensor& q,
                                          const Tensor& p) {
  absl::StatusOr<MatmulShape> shape = check_matmul(m, false, q, false, p);
  if (!shape.ok()) return shape.status();
  if (absl::Status s = check_elementwise("add_then_matmul", m, input, true); !s.ok()) return s;
  if (absl::Status s = on_cpu(m, "add_then_matmul"); !s.ok()) return s;
  const int64_t rows = shape->m, cols = shape->k, rank = shape->n;
  for (int64_t b = 0; b < shape->batch; ++b) {
    add_then_matmul_m_q(m.data_as<float>() + b * rows * cols,
                        input.data_as<float>() + b * rows * cols, rows, cols,
                        q.data_as<float>() + b * cols * rank, rank,
                        p.data_as<float>() + b * rows * rank);
  }
  return absl::OkStatus();
}

absl::Status HostKernels::matmul_then_subtract(const Tensor& p, const Tensor& q,
                                               const Tensor& out, const Tensor& error) {
  absl::StatusOr<FactorShape> shape = factor_shape("matmul_then_subtract", out, p, q);
  if (!shape.ok()) return shape.status();
  if (error.defined()) {
    if (absl::Status s = check_elementwise("matmul_then_subtract", out, error, true); !s.ok()) {
      return s;
    }
  }
  const int64_t rows = shape->rows, cols = shape->cols, rank = shape->rank;
  for (int64_t b = 0; b < shape->batch; ++b) {
    decompress_p_qt(p.data_as<float>() + b * rows * rank, q.data_as<float>() + b * cols * rank,
                    rows, cols, rank, out.data_as<float>() + b * rows * cols,
                    error.defined() ? error.data_as<float>() + b * rows * cols : nullptr);
  }
  return absl::OkStatus();
}

absl::Status HostKernels::add_scaled(const Tensor& a, float alpha, const Tensor& b,
                                     const Tensor& out) {
  if (absl::Status s = check_elementwise("add_scaled", a, b, true); !s.ok()) return s;
  if (absl::Status s = check_elementwise("add_scaled: out", a, out, true); !s.ok()) return s;
  if (absl::Status s = on_cpu(a, "add_scaled"); !s.ok()) return s;
  const int64_t n = a.numel();
  // In place and apart: the vectorized loops (a + b and a - b are the same
  // arithmetic as a + alpha * b at alpha = +-1).
  if (out.data() == a.data() && a.data() != b.data() && (alpha == 1.0f || alpha == -1.0f)) {
    if (alpha == 1.0f) {
      add_inplace(a.data_as<float>(), b.data_as<float>(), n);
    } else {
      subtract_inplace(a.data_as<float>(), b.data_as<float>(), n);
    }
    return absl::OkStatus();
  }
  cuda_math::add_scaled_thread(a.data_as<float>(), alpha, b.data_as<float>(),
                               out.data_as<float>(), n, 0, 1);
  return absl::OkStatus();
}

absl::Status HostKernels::divide(const Tensor& x, float divisor) {
  if (absl::Status s = check_elementwise("divide", x, Tensor(), false); !s.ok()) return s;
  if (absl::Status s = on_cpu(x, "divide"); !s.ok()) return s;
  const int64_t n = x.numel();
  switch (x.dtype()) {
    case DType::kFloat32:
      kernels::divide(x.data_as<float>(), n, divisor);
      return absl::OkStatus();
    case DType::kFloat64: {
      double* d = x.data_as<double>();
      for (int64_t i = 0; i < n; ++i) d[i] /= divisor;
      return absl::OkStatus();
    }
    case DType::kFloat16: {
      uint16_t* h = bits(x);
      for (int64_t i = 0; i < n; ++i) h[i] = float_to_half_bits(half_bits_to_float(h[i]) / divisor);
      return absl::OkStatus();
    }
    case DType::kBFloat16: {
      uint16_t* b = bits(x);
      for (int64_t i = 0; i < n; ++i) {
        b[i] = float_to_bfloat16_bits(bfloat16_bits_to_float(b[i]) / divisor);
      }
      return absl::OkStatus();
    }
    default:
      return absl::InvalidArgumentError(
          absl::StrCat("divide: floating dtypes only, got ", x.str()));
  }
}

absl::Status HostKernels::fill(const Tensor& x, float value) {
  if (absl::Status s = check_elementwise("fill", x, Tensor(), true); !s.ok()) return s;
  if (absl::Status s = on_cpu(x, "fill"); !s.ok()) return s;
  std::fill(x.data_as<float>(), x.data_as<float>() + x.numel(), value);
  return absl::OkStatus();
}

absl::Status HostKernels::zero(const Tensor& x) {
  if (absl::Status s = check_elementwise("zero", x, Tensor(), false); !s.ok()) return s;
  if (absl::Status s = on_cpu(x, "zero"); !s.ok()) return s;
  if (x.nbytes() > 0) memset(x.data(), 0, x.nbytes());
  return absl::OkStatus();
}

absl::Status HostKernels::copy(const Tensor& src, const Tensor& dst) {
  if (absl::Status s = check_elementwise("copy", src, dst, false); !s.ok()) return s;
  if (absl::Status s = on_cpu(src, "copy"); !s.ok()) return s;
  if (src.nbytes() > 0 && src.data() != dst.data()) memmove(dst.data(), src.data(), src.nbytes());
  return absl::OkStatus();
}

absl::Status HostKernels::synchronize(Device) { return absl::OkStatus(); }

DeviceKernels& host_kernels() {
  static HostKernels* kernels = new HostKernels();
  return *kernels;
}

}  // namespace ddpx
