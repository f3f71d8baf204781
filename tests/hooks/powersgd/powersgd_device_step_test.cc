// The PowerSGD step (hooks/powersgd_step.h) with a device's memory layout
// (PowerSGDMemories::kTensors: error and P/Q memories as tensors beside the
// buffer) run on the CPU through HostDeviceKernels, the host kernels with
// call counts, against the step with the CPU's layout (host vectors) on the
// same inputs and real Gloo ranks: everything a device bucket's step
// decides by itself (memories, grouping, packing, the order of stages,
// error feedback, warm start, the 16-bit wire, the checkpoint of device
// memories) is checked here; what only a GPU can show (streams, cuBLAS, the
// kernels) is //tests/hooks:gpu_hooks_test.
#include <algorithm>
#include <cmath>
#include <sstream>
#include <string>
#include <vector>

#include "gtest/gtest.h"
#include "hooks/powersgd_plan.h"
#include "hooks/powersgd_step.h"
#include "hooks/powersgd_work_buffer.h"
#include "tests/hooks/powersgd/host_device_kernels.h"
#include "tests/hooks/powersgd/powersgd_test_util.h"
#include "tests/rank_threads.h"

namespace ddpx {
namespace {

using rank_threads::make_groups;
using rank_threads::on_every_rank;
using powersgd_test::random_input;
using powersgd_test::total_numel;

// Same-shape matrices back to back (batched on the device), one of the same
// shape after a vector (its own call), a vector, and a matrix that fails the
// compression test (sent uncompressed).
const std::vector<Shape> kShapes = {{16, 12}, {16, 12}, {16, 12}, {7},
                                    {16, 12}, {9, 20}, {3, 2}};

std::shared_ptr<PowerSGDState> make_state(const PowerSGDOptions& o) {
  auto state = PowerSGDState::create(o);
  EXPECT_TRUE(state.ok()) << state.status();
  (*state)->set_log_sink([](const std::string&) {});
  return *state;
}

std::vector<int64_t> offsets_of(const std::vector<Shape>& shapes) {
  std::vector<int64_t> offsets;
  int64_t at = 0;
  for (const Shape& s : shapes) {
    offsets.push_back(at);
    at += shape_numel(s);
  }
  return offsets;
}

CompressionPlan layerwise(const std::vector<Shape>& shapes, const PowerSGDOptions& o) {
  auto plan = plan_layerwise(offsets_of(shapes), shapes, total_numel(shapes), o);
  EXPECT_TRUE(plan.ok()) << plan.status();
  return *plan;
}

std::vector<float> values(const Tensor& t) { return t.to_float_vector(); }

// One step of either path over `buffer` (rewritten in place).
absl::Status cpu_step(std::shared_ptr<ProcessGroup> pg, std::shared_ptr<PowerSGDState> state,
                      const Tensor& buffer, CompressionPlan plan, DType wire) {
  PowerSGDStepInput in;
  in.buffer = buffer;
  in.bucket_is_last = true;
  in.wire_dtype = wire;
  in.plan = std::move(plan);
  in.finish = [buffer]() -> absl::StatusOr<Tensor> { return buffer; };
  return run_powersgd_step(pg, state, std::move(in))->wait(std::chrono::seconds(60));
}

absl::Status device_step(std::shared_ptr<ProcessGroup> pg,
                         std::shared_ptr<PowerSGDState> state, const Tensor& buffer,
                         CompressionPlan plan, DType wire, DeviceKernels& k) {
  PowerSGDStepInput in;
  in.buffer = buffer;
  in.bucket_is_last = true;
  in.wire_dtype = wire;
  in.plan = std::move(plan);
  in.kernels = &k;
  in.memories = PowerSGDMemories::kTensors;
  in.finish = [buffer]() -> absl::StatusOr<Tensor> { return buffer; };
  return run_powersgd_step(pg, state, std::move(in))->wait(std::chrono::seconds(60));
}

// |got - want| <= tolerance * (largest |want|, at least 1), element-wise.
void expect_close(const std::vector<float>& got, const std::vector<float>& want,
                  float tolerance, const std::string& what) {
  ASSERT_EQ(got.size(), want.size()) << what;
  float scale = 1.0f;
  for (float w : want) scale = std::max(scale, std::fabs(w));
  for (size_t i = 0; i < want.size(); ++i) {
    ASSERT_NEAR(got[i], want[i], tolerance * scale) << what << " element " << i;
  }
}

// `steps` compressed steps of both paths on every rank of a `world`-rank
// Gloo group; each rank compares outputs, errors and warm-start memories.
// One group per test: tearing a Gloo group down while the next one starts
// up is not what is under test here.
void expect_device_step_matches_cpu_step(
    const std::vector<std::shared_ptr<ProcessGroup>>& ranks, const PowerSGDOptions& o,
    int steps, DType wire, float tolerance) {
  const int world = static_cast<int>(ranks.size());
  const int64_t n = total_numel(kShapes);
  on_every_rank(world, [&](int rank) {
    auto cpu_state = make_state(o);
    auto dev_state = make_state(o);
    HostDeviceKernels k;
    for (int step = 0; step < steps; ++step) {
      const std::vector<float> input = random_input(n, 7, rank, step);
      Tensor on_cpu = Tensor::from_vector(input);
      Tensor on_dev = Tensor::from_vector(input);
      ASSERT_TRUE(cpu_step(ranks[rank], cpu_state, on_cpu, layerwise(kShapes, o), wire).ok());
      absl::Status s = device_step(ranks[rank], dev_state, on_dev, layerwise(kShapes, o), wire, k);
      ASSERT_TRUE(s.ok()) << s;
      expect_close(values(on_dev), values(on_cpu), tolerance,
                   "rank " + std::to_string(rank) + " step " + std::to_string(step));
    }
    PowerSGDBucketMemory& cpu_mem = cpu_state->bucket_memory(0);
    PowerSGDBucketMemory& dev_mem = dev_state->bucket_memory(0);
    EXPECT_EQ(cpu_state->iter(), dev_state->iter());
    if (o.use_error_feedback) {
      ASSERT_TRUE(dev_mem.device_error.defined());
      EXPECT_TRUE(dev_mem.error.empty()) << "the device copy holds the truth";
      expect_close(values(dev_mem.device_error), cpu_mem.error, tolerance, "error");
    } else {
      EXPECT_FALSE(dev_mem.device_error.defined());
    }
    if (o.warm_start) {
      ASSERT_TRUE(dev_mem.device_q_memory.defined());
      expect_close(values(dev_mem.device_p_memory), cpu_mem.p_memory, tolerance, "P memory");
      expect_close(values(dev_mem.device_q_memory), cpu_mem.q_memory, tolerance, "Q memory");
    }
  });
}

PowerSGDOptions options(int64_t rank, bool feedback_and_warm) {
  PowerSGDOptions o;
  o.matrix_approximation_rank = rank;
  o.start_powerSGD_iter = 2;
  o.use_error_feedback = feedback_and_warm;
  o.warm_start = feedback_and_warm;
  return o;
}

TEST(PowerSGDDeviceStep, MatchesTheCpuStepWithErrorFeedbackAndWarmStart) {
  expect_device_step_matches_cpu_step(make_groups(2), options(2, true), 4,
                                      DType::kFloat32, 1e-4f);
}

TEST(PowerSGDDeviceStep, MatchesTheCpuStepWithoutMemoriesAtRanks1And3) {
  const auto ranks = make_groups(2);
  expect_device_step_matches_cpu_step(ranks, options(1, false), 3, DType::kFloat32, 1e-4f);
  PowerSGDOptions o = options(3, false);
  o.orthogonalization_epsilon = 1e-8f;
  expect_device_step_matches_cpu_step(ranks, o, 3, DType::kFloat32, 1e-4f);
}

TEST(PowerSGDDeviceStep, MatchesTheCpuStepOnAHalfWire) {
  // Both paths round P, Q and the uncompressed batch to float16 for the
  // allreduce; a last-bit difference before that rounding may move a value
  // by one float16 step (2^-11 relative), hence the looser tolerance.
  const auto ranks = make_groups(2);
  expect_device_step_matches_cpu_step(ranks, options(2, true), 3, DType::kFloat16, 5e-3f);
  expect_device_step_matches_cpu_step(ranks, options(2, true), 3, DType::kBFloat16, 3e-2f);
}

TEST(PowerSGDDeviceStep, BatchedSquareMatchesTheCpuStep) {
  PowerSGDOptions o = options(2, true);
  const int64_t length = 150, side = square_side(length);
  auto ranks = make_groups(2);
  on_every_rank(2, [&](int rank) {
    auto cpu_state = make_state(o);
    auto dev_state = make_state(o);
    HostDeviceKernels k;
    for (int step = 0; step < 3; ++step) {
      std::vector<float> square(side * side, 0.0f);
      const std::vector<float> input = random_input(length, 3, rank, step);
      std::copy(input.begin(), input.end(), square.begin());
      Tensor on_cpu = Tensor::from_vector(square), on_dev = Tensor::from_vector(square);
      ASSERT_TRUE(cpu_step(ranks[rank], cpu_state, on_cpu, plan_square(length, o),
                           DType::kFloat32).ok());
      ASSERT_TRUE(device_step(ranks[rank], dev_state, on_dev, plan_square(length, o),
                              DType::kFloat32, k).ok());
      expect_close(values(on_dev), values(on_cpu), 1e-4f, "batched step " + std::to_string(step));
    }
  });
}

TEST(PowerSGDDeviceStep, GroupsSameShapeMatricesThatLieBackToBack) {
  PowerSGDOptions o = options(2, true);
  const CompressionPlan plan = layerwise(kShapes, o);
  const std::vector<MatrixGroup> groups = matrix_groups(plan);
  // The plan lists the four 16x12 matrices first (torch's grouping); the
  // fourth sits after the vector, so it needs its own call.
  ASSERT_EQ(groups.size(), 3u);
  EXPECT_EQ(groups[0].first, 0u);
  EXPECT_EQ(groups[0].count, 3);
  EXPECT_EQ(groups[1].first, 3u);
  EXPECT_EQ(groups[1].count, 1);
  EXPECT_EQ(plan.matrices[groups[2].first].rows, 9);
  EXPECT_EQ(groups[2].count, 1);

  // One step: 3 groups x 3 products, 3 groups x 2 orthogonalizations.
  HostDeviceKernels k;
  Tensor buffer = Tensor::from_vector(random_input(total_numel(kShapes), 1, 0, 0));
  ASSERT_TRUE(device_step(nullptr, make_state(o), buffer, plan, DType::kFloat32, k).ok());
  EXPECT_EQ(k.matmul_calls.load(), 9);
  EXPECT_EQ(k.orthogonalize_calls.load(), 6);
}

TEST(PowerSGDDeviceStep, CheckpointOfDeviceMemoriesResumesBitForBit) {
  PowerSGDOptions o = options(2, true);
  const int64_t n = total_numel(kShapes);
  HostDeviceKernels k;
  auto running = make_state(o);
  for (int step = 0; step < 2; ++step) {
    Tensor buffer = Tensor::from_vector(random_input(n, 5, 0, step));
    ASSERT_TRUE(device_step(nullptr, running, buffer, layerwise(kShapes, o),
                            DType::kFloat32, k).ok());
  }
  std::stringstream image;
  ASSERT_TRUE(running->save(image).ok());
  auto resumed = make_state(options(1, false));  // load replaces the options too
  ASSERT_TRUE(resumed->load(image).ok());
  PowerSGDBucketMemory& loaded = resumed->bucket_memory(0);
  EXPECT_FALSE(loaded.device_error.defined()) << "a load keeps memories on the host";
  EXPECT_EQ(static_cast<int64_t>(loaded.error.size()), n);

  // The resumed device state uploads the loaded memories and continues
  // exactly as the running one; a CPU state loading the same image continues
  // the same way (to float rounding: other kernels).
  std::stringstream again;
  ASSERT_TRUE(running->save(again).ok());
  auto on_cpu = make_state(o);
  ASSERT_TRUE(on_cpu->load(again).ok());
  for (int step = 2; step < 4; ++step) {
    const std::vector<float> input = random_input(n, 5, 0, step);
    Tensor a = Tensor::from_vector(input), b = Tensor::from_vector(input),
           c = Tensor::from_vector(input);
    ASSERT_TRUE(device_step(nullptr, running, a, layerwise(kShapes, o), DType::kFloat32, k).ok());
    ASSERT_TRUE(device_step(nullptr, resumed, b, layerwise(kShapes, o), DType::kFloat32, k).ok());
    ASSERT_TRUE(cpu_step(nullptr, on_cpu, c, layerwise(kShapes, o), DType::kFloat32).ok());
    EXPECT_EQ(values(a), values(b)) << "step " << step;
    expect_close(values(c), values(a), 1e-4f, "CPU resume of a device checkpoint");
  }
  EXPECT_TRUE(loaded.device_error.defined());
  EXPECT_TRUE(loaded.error.empty());
}

TEST(PowerSGDDeviceStep, ABucketThatChangedSizeIsAClearError) {
  PowerSGDOptions o = options(2, true);
  HostDeviceKernels k;
  auto state = make_state(o);
  Tensor buffer = Tensor::from_vector(random_input(total_numel(kShapes), 1, 0, 0));
  ASSERT_TRUE(device_step(nullptr, state, buffer, layerwise(kShapes, o), DType::kFloat32, k).ok());
  const std::vector<Shape> smaller = {{16, 12}};
  Tensor other = Tensor::from_vector(random_input(total_numel(smaller), 1, 0, 1));
  absl::Status s = device_step(nullptr, state, other, layerwise(smaller, o), DType::kFloat32, k);
  EXPECT_TRUE(absl::IsFailedPrecondition(s)) << s;
  EXPECT_NE(s.message().find("has 192 elements but its remembered error has"),
            std::string::npos)
      << s;
}

TEST(PowerSGDDeviceStep, AWrongBufferOrBucketDtypeIsNamed) {
  PowerSGDOptions o = options(2, true);
  PowerSGDStepInput in;
  in.buffer = Tensor::zeros({total_numel(kShapes)}, DType::kFloat64);
  in.plan = layerwise(kShapes, o);
  in.memories = PowerSGDMemories::kTensors;
  absl::Status s = run_powersgd_step(nullptr, make_state(o), in)->wait();
  EXPECT_TRUE(absl::IsInvalidArgument(s)) << s;
  EXPECT_NE(s.message().find("works on a float32 buffer"), std::string::npos) << s;
  EXPECT_NE(s.message().find("float64"), std::string::npos) << s;

  HostDeviceKernels k;
  Tensor f64 = Tensor::zeros({4}, DType::kFloat64);
  absl::StatusOr<Tensor> work = float32_work(f64, k, "PowerSGD");
  EXPECT_TRUE(absl::IsInvalidArgument(work.status())) << work.status();
  EXPECT_NE(work.status().message().find("float64"), std::string::npos) << work.status();
}

// The helpers the hooks use around a device step: a 16-bit bucket is
// widened into the float32 work buffer and the result narrowed back, through
// the device casts; a float32 bucket is its own work buffer.
TEST(PowerSGDDeviceStep, BucketDtypesGoThroughTheDeviceCasts) {
  HostDeviceKernels k;
  Tensor f32 = Tensor::from_vector(std::vector<float>{1.5f, -2.0f, 3.25f});
  absl::StatusOr<Tensor> same = float32_work(f32, k, "PowerSGD");
  ASSERT_TRUE(same.ok());
  EXPECT_TRUE(same->shares_storage_with(f32));
  EXPECT_TRUE(store_result(*same, f32, k).ok());

  Tensor half = Tensor::zeros({3}, DType::kFloat16);
  ASSERT_TRUE(k.cast(f32, half).ok());
  absl::StatusOr<Tensor> widened = float32_work(half, k, "PowerSGD");
  ASSERT_TRUE(widened.ok());
  EXPECT_EQ(values(*widened), values(f32));
  ASSERT_TRUE(k.fill(*widened, 0.5f).ok());
  ASSERT_TRUE(store_result(*widened, half, k).ok());
  EXPECT_EQ(values(half), (std::vector<float>{0.5f, 0.5f, 0.5f}));

  // The batched hook's square: the bucket lands in its head.
  Tensor square = Tensor::zeros({9}, DType::kFloat32);
  ASSERT_TRUE(load_bucket(f32, square, k, "batched PowerSGD").ok());
  EXPECT_EQ(values(square), (std::vector<float>{1.5f, -2.0f, 3.25f, 0, 0, 0, 0, 0, 0}));
}

}  // namespace
}  // namespace ddpx
