// PowerSGD's part of hook_bench: how long PowerSGD's own work (everything
// but communication) takes on ResNet-50's gradients (~25.6M float32 values in
// DDP's buckets), against the time of its two GEMMs alone (P = M Q and
// Q = M^T P through OpenBLAS on the same matrices), and against torch's
// powerSGD_hook on a 1-rank gloo group when python3 can import torch.
// Times are CPU time of the process with one BLAS thread on both sides
// (medians over `iterations`): robust on a shared machine.
#ifndef DDPX_EXAMPLES_BENCHMARKS_POWERSGD_BENCH_PART_H_
#define DDPX_EXAMPLES_BENCHMARKS_POWERSGD_BENCH_PART_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "core/tensor.h"

namespace ddpx {

struct PowerSGDBenchConfig {
  int64_t rank = 1;          // matrix_approximation_rank
  int iterations = 5;        // timed compressed iterations (median reported)
  bool use_error_feedback = true;
  bool with_torch = true;    // also time torch's hook (skipped if no torch)
  // Gradient shapes in registration order; empty means ResNet-50's.
  std::vector<Shape> shapes;
};

struct PowerSGDBenchResult {
  int64_t rank = 1;
  int64_t numel = 0;
  int buckets = 0;
  int compressed_matrices = 0;
  double own_work_ms = 0;   // our hook, no communication (group of one)
  bool use_error_feedback = true;
  // The two products alone (P = M Q, Q = M^T P per matrix, back to back):
  double hook_products_ms = 0;     // the hook's streaming kernels
  double library_products_ms = 0;  // OpenBLAS: sgemv at rank 1, sgemm above
  double gemm_ms = 0;              // the anchor: the faster of the two above
  double sgemm_ms = 0;             // the two products as plain cblas_sgemm
  // The memory traffic a step must move (7 |M| with error feedback, 3 |M|
  // without) as plain streaming passes over the same buffers: no
  // implementation of the step can be faster than this.
  double traffic_floor_ms = 0;
  double traffic_floor_bytes = 0;
  double ours_gloo_ms = 0;  // our hook on a 1-rank gloo group
  double torch_ms = -1;     // torch's hook on a 1-rank gloo group; -1 if not run
  std::string torch_note;   // why torch was not run, if it was not

  double powersgd_vs_gemm() const { return own_work_ms / gemm_ms; }
  // How many times faster ours is than torch's (same 1-rank gloo setting).
  double powersgd_vs_torch() const {
    return torch_ms > 0 ? torch_ms / ours_gloo_ms : 0;
  }
  // "powersgd_vs_gemm=1.21 powersgd_vs_torch=3.4 ..." for a RESULT line.
  std::string result_fields() const;
  // Human-readable lines.
  std::string report() const;
};

// ResNet-50's parameter shapes in registration order (25,557,032 values).
std::vector<Shape> resnet50_gradient_shapes();

// One bucket's flat layout: its tensors' shapes in bucket order, each
// tensor's offset, and the bucket's length (elements).
struct BucketLayout {
  std::vector<Shape> shapes;
  std::vector<int64_t> offsets;
  int64_t numel = 0;
};

// DDP's bucketing of `shapes`: reverse registration order, a 1 MiB first
// bucket, then 25 MiB caps (float32).
std::vector<BucketLayout> ddp_float32_buckets(const std::vector<Shape>& shapes);

absl::StatusOr<PowerSGDBenchResult> run_powersgd_bench(
    const PowerSGDBenchConfig& config);

}  // namespace ddpx

#endif  // DDPX_EXAMPLES_BENCHMARKS_POWERSGD_BENCH_PART_H_
