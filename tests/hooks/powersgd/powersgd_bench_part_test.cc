// The PowerSGD bench part runs end to end on small shapes and reports sane
// figures (the full ResNet-50 run is powersgd_bench_run / hook_bench).
#include "examples/benchmarks/powersgd_bench_part.h"
#include <algorithm>

#include "gtest/gtest.h"

namespace ddpx {
namespace {

TEST(PowerSGDBenchPart, ResNet50ShapesHoldItsParameterCount) {
  int64_t n = 0;
  for (const Shape& s : resnet50_gradient_shapes()) n += shape_numel(s);
  EXPECT_EQ(n, 25557032);
}

TEST(PowerSGDBenchPart, RunsOnSmallShapes) {
  PowerSGDBenchConfig config;
  config.iterations = 2;
  config.with_torch = false;
  config.shapes = {{64, 32, 3, 3}, {64}, {128, 64}, {128}, {10, 128}};
  auto r = run_powersgd_bench(config);
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->numel, 64 * 32 * 9 + 64 + 128 * 64 + 128 + 1280);
  EXPECT_EQ(r->compressed_matrices, 3);
  EXPECT_GT(r->own_work_ms, 0);
  EXPECT_GT(r->gemm_ms, 0);
  EXPECT_EQ(r->gemm_ms, std::min(r->hook_products_ms, r->library_products_ms));
  EXPECT_GT(r->traffic_floor_ms, 0);
  // 7 passes of 4 bytes over every value with error feedback.
  EXPECT_EQ(r->traffic_floor_bytes, 7.0 * 4.0 * r->numel);
  EXPECT_GT(r->ours_gloo_ms, 0);
  EXPECT_NE(r->result_fields().find("powersgd_vs_gemm="), std::string::npos);
  EXPECT_NE(r->result_fields().find("powersgd_traffic_floor_vs_gemm="), std::string::npos);
}

}  // namespace
}  // namespace ddpx
