// powerSGD_hook and batched_powerSGD_hook on real Gloo ranks (threads of this
// process talking over loopback TCP).
#include <algorithm>
#include <cmath>
#include <map>
#include <memory>
#include <sstream>
#include <string>
#include <vector>

#include "gtest/gtest.h"
#include "hooks/batched_powersgd_hook.h"
#include "hooks/hook_stats.h"
#include "hooks/powersgd_hook.h"
#include "tests/hooks/powersgd/batched_reference.h"
#include "tests/hooks/powersgd/powersgd_test_util.h"
#include "tests/rank_threads.h"

namespace ddpx {
namespace {

using powersgd_test::BatchedPowerSGDReference;
using powersgd_test::make_bucket;
using rank_threads::make_groups;
using rank_threads::on_every_rank;
using powersgd_test::random_input;
using powersgd_test::total_numel;
using Options = std::map<std::string, std::string>;
using Values = std::vector<float>;

std::vector<std::unique_ptr<CommHook>> make_hooks(
    const std::vector<std::shared_ptr<ProcessGroup>>& pgs, const Options& options,
    bool batched) {
  std::vector<std::unique_ptr<CommHook>> hooks;
  for (const auto& pg : pgs) {
    auto hook = make_powersgd_hook(pg, options, batched);
    EXPECT_TRUE(hook.ok()) << hook.status();
    hooks.push_back(*std::move(hook));
  }
  return hooks;
}

PowerSGDState& state_of(CommHook& hook) {
  return dynamic_cast<PowerSGDHookBase&>(hook).state();
}

void silence(std::vector<std::unique_ptr<CommHook>>& hooks) {
  for (auto& h : hooks) state_of(*h).set_log_sink([](const std::string&) {});
}

// One bucket through every rank's hook; returns each rank's result.
std::vector<Values> run_bucket(std::vector<std::unique_ptr<CommHook>>& hooks,
                               const std::vector<Shape>& shapes,
                               const std::vector<Values>& inputs,
                               size_t index = 0, bool is_last = true) {
  const int size = static_cast<int>(hooks.size());
  std::vector<Values> outputs(size);
  on_every_rank(size, [&](int r) {
    GradBucket bucket = make_bucket(index, is_last, shapes, inputs[r]);
    auto result = hooks[r]->run(bucket)->result();
    ASSERT_TRUE(result.ok()) << "rank " << r << ": " << result.status();
    ASSERT_EQ(result->numel(), total_numel(shapes));
    outputs[r] = result->to_float_vector();
  });
  return outputs;
}

std::vector<Values> random_inputs(int size, int64_t numel, uint64_t seed, int it) {
  std::vector<Values> in;
  for (int r = 0; r < size; ++r) in.push_back(random_input(numel, seed, r, it));
  return in;
}

Values exact_average(const std::vector<Values>& inputs) {
  Values avg(inputs[0].size(), 0.0f);
  for (size_t i = 0; i < avg.size(); ++i) {
    double s = 0;
    for (const Values& v : inputs) s += v[i];
    avg[i] = static_cast<float>(s / inputs.size());
  }
  return avg;
}

void expect_near_all(const Values& got, const Values& want, double tol,
                     const std::string& what) {
  ASSERT_EQ(got.size(), want.size()) << what;
  for (size_t i = 0; i < got.size(); ++i)
    ASSERT_NEAR(got[i], want[i], tol * (1 + std::fabs(want[i]))) << what << " [" << i << "]";
}

void expect_same_on_every_rank(const std::vector<Values>& outputs) {
  for (size_t r = 1; r < outputs.size(); ++r) EXPECT_EQ(outputs[r], outputs[0]) << "rank " << r;
}

const std::vector<Shape> kShapes = {{6, 4}, {5}, {3, 7}, {2, 3, 4}};

TEST(PowerSGDHook, FullRankEqualsTheExactAverageForWorldSizesOneToFour) {
  for (int size = 1; size <= 4; ++size) {
    SCOPED_TRACE("world size " + std::to_string(size));
    auto pgs = make_groups(size);
    // rank >= min(rows, cols) everywhere, and a rate low enough that every
    // matrix compresses: P Q^T is then the exact average.
    auto hooks = make_hooks(pgs, {{"rank", "8"}, {"start_iter", "2"},
                                  {"min_compression_rate", "0.1"}}, false);
    silence(hooks);
    const int64_t n = total_numel(kShapes);
    for (int it = 0; it < 5; ++it) {
      auto inputs = random_inputs(size, n, 1, it);
      auto outputs = run_bucket(hooks, kShapes, inputs);
      expect_same_on_every_rank(outputs);
      expect_near_all(outputs[0], exact_average(inputs), 1e-5,
                      "iteration " + std::to_string(it));
    }
    // Iterations 2-4 compressed all three matrices: 3 x 3 compressions.
    CompressionStats stats = state_of(*hooks[0]).compression_stats();
    EXPECT_EQ(stats.numel_before, 3 * n);
    EXPECT_EQ(stats.numel_after, 3 * ((6 + 4) * 4 + 5 + (3 + 7) * 3 + (2 + 12) * 2));
    EXPECT_EQ(state_of(*hooks[0]).iter(), 5);
  }
}

TEST(PowerSGDHook, BeforeStartIterIsBitForBitThePlainAveragedAllreduce) {
  auto pgs = make_groups(3);
  auto hooks = make_hooks(pgs, {{"rank", "1"}, {"start_iter", "3"}}, false);
  silence(hooks);
  const int64_t n = total_numel(kShapes);
  for (int it = 0; it < 3; ++it) {
    auto inputs = random_inputs(3, n, 2, it);
    auto outputs = run_bucket(hooks, kShapes, inputs);
    // The allreduce hook's recipe on the same group: divide, then SUM.
    std::vector<Values> expected(3);
    on_every_rank(3, [&](int r) {
      Tensor t = Tensor::from_vector(inputs[r]);
      float* d = t.data_as<float>();
      for (int64_t i = 0; i < n; ++i) d[i] /= 3.0f;
      ASSERT_TRUE(pgs[r]->allreduce({t})->wait().ok());
      expected[r] = t.to_float_vector();
    });
    for (int r = 0; r < 3; ++r) EXPECT_EQ(outputs[r], expected[r]) << "rank " << r;
    EXPECT_EQ(state_of(*hooks[0]).iter(), it + 1);
  }
  EXPECT_TRUE(state_of(*hooks[0]).compressing());
  EXPECT_TRUE(state_of(*hooks[0]).bucket_indices().empty());  // nothing remembered
}

TEST(PowerSGDHook, CompressOrNotDecisions) {
  auto pgs = make_groups(2);
  auto hooks = make_hooks(pgs, {{"rank", "1"}, {"start_iter", "2"}}, false);
  silence(hooks);
  // (20,16) compresses at rank 1: (36)*1*2 < 320. (3,2): 5*2 < 6 is false.
  // (16,) is a bias. (4,1,1) -> (4,1): 5*2 < 4 is false.
  const std::vector<Shape> shapes = {{20, 16}, {3, 2}, {16}, {4, 1, 1}};
  const int64_t n = total_numel(shapes);
  for (int it = 0; it < 3; ++it) {
    auto inputs = random_inputs(2, n, 3, it);
    auto outputs = run_bucket(hooks, shapes, inputs);
    expect_same_on_every_rank(outputs);
    const Values avg = exact_average(inputs);
    // Uncompressed tensors: the average, SUM then divide as torch does.
    for (int64_t i = 320; i < n; ++i) {
      const float want = (inputs[0][i] + inputs[1][i]) / 2.0f;
      if (it < 2) {
        EXPECT_NEAR(outputs[0][i], avg[i], 1e-6);
      } else {
        // With error feedback the first compressed step adds a zero error.
        EXPECT_FLOAT_EQ(outputs[0][i], want) << i;
      }
    }
    if (it == 2) {
      // The 20x16 matrix went through rank 1: not the average, but rank 1.
      double diff = 0;
      for (int64_t i = 0; i < 320; ++i) diff += std::fabs(outputs[0][i] - avg[i]);
      EXPECT_GT(diff, 1.0);
      // Every 2x2 minor of a rank-1 matrix vanishes.
      const float* m = outputs[0].data();
      for (int r = 1; r < 20; ++r)
        for (int c = 1; c < 16; ++c)
          EXPECT_NEAR(m[0] * m[r * 16 + c], m[c] * m[r * 16], 1e-4);
    }
  }
  CompressionStats s = state_of(*hooks[0]).compression_stats();
  EXPECT_EQ(s.numel_before, n);
  EXPECT_EQ(s.numel_after, 36 + 6 + 16 + 4);
  // Traffic: two plain allreduces of the bucket, then the uncompressed
  // tensors, P (20 x 1) and Q (16 x 1) as three allreduces.
  HookStats traffic = comm_hook_stats(*hooks[0]);
  EXPECT_EQ(traffic.calls, 3u);
  EXPECT_EQ(traffic.input_bytes, 3u * n * 4);
  EXPECT_EQ(traffic.payload_bytes, (2u * n + 6 + 16 + 4 + 20 + 16) * 4);
  EXPECT_GT(traffic.compression_ratio(), 1.0);
}

TEST(PowerSGDHook, ErrorFeedbackCarriesWhatCompressionDropped) {
  const int size = 2, iterations = 40;
  const std::vector<Shape> shapes = {{24, 20}, {7}};
  const int64_t n = total_numel(shapes);
  auto drift = [&](bool error_feedback, std::vector<Values>* final_errors) {
    auto pgs = make_groups(size);
    auto hooks = make_hooks(pgs, {{"rank", "1"}, {"start_iter", "2"},
                                  {"use_error_feedback", error_feedback ? "1" : "0"}},
                            false);
    silence(hooks);
    std::vector<double> applied(n, 0.0), truth(n, 0.0);
    // A steady rank-2 gradient (singular values 3 and 2) plus noise: rank 1
    // drops the second component at every step unless it is fed back.
    Values steady(n, 0.0f);
    {
      auto unit = [](Values v) {
        double s = 0;
        for (float x : v) s += double(x) * x;
        for (float& x : v) x = static_cast<float>(x / std::sqrt(s));
        return v;
      };
      const Values a = unit(random_input(24, 41, 0, 0)), b = unit(random_input(20, 42, 0, 0));
      const Values c = unit(random_input(24, 43, 0, 0)), d = unit(random_input(20, 44, 0, 0));
      for (int i = 0; i < 24; ++i)
        for (int j = 0; j < 20; ++j) steady[i * 20 + j] = 3 * a[i] * b[j] + 2 * c[i] * d[j];
      for (int64_t i = 480; i < n; ++i) steady[i] = 1.0f;
    }
    for (int it = 0; it < iterations; ++it) {
      auto inputs = random_inputs(size, n, 4, it);
      for (Values& in : inputs)
        for (int64_t i = 0; i < n; ++i) in[i] = steady[i] + 0.05f * in[i];
      auto outputs = run_bucket(hooks, shapes, inputs);
      const Values avg = exact_average(inputs);
      for (int64_t i = 0; i < n; ++i) {
        applied[i] += outputs[0][i];
        truth[i] += avg[i];
      }
    }
    if (final_errors) {
      for (auto& h : hooks) final_errors->push_back(state_of(*h).bucket_memory(0).error);
    }
    std::vector<double> d(n);
    for (int64_t i = 0; i < n; ++i) d[i] = truth[i] - applied[i];
    return d;
  };
  std::vector<Values> errors;
  const std::vector<double> with_ef = drift(true, &errors);
  // On every rank, sum(applied) = sum(own inputs) - final error, so over the
  // ranks: sum(true averages) - sum(applied) = mean of the final errors.
  double ef_norm = 0;
  for (int64_t i = 0; i < n; ++i) {
    const double mean_error = (double(errors[0][i]) + errors[1][i]) / size;
    EXPECT_NEAR(with_ef[i], mean_error, 1e-3) << i;
    ef_norm += with_ef[i] * with_ef[i];
  }
  const std::vector<double> without_ef = drift(false, nullptr);
  double no_ef_norm = 0;
  for (double v : without_ef) no_ef_norm += v * v;
  // Without feedback what rank 1 drops from the steady gradient accumulates
  // over the 38 compressed steps; with it the shortfall stays bounded.
  EXPECT_LT(std::sqrt(ef_norm) * 4, std::sqrt(no_ef_norm))
      << "with " << std::sqrt(ef_norm) << " without " << std::sqrt(no_ef_norm);
}

TEST(PowerSGDHook, SaveAndLoadResumeBitForBit) {
  const int size = 2;
  const std::vector<Shape> shapes = {{12, 10}, {9}, {10, 12}, {12, 10}};
  const int64_t n = total_numel(shapes);
  for (const char* warm : {"1", "0"}) {
    SCOPED_TRACE(std::string("warm_start=") + warm);
    const Options options = {{"rank", "2"}, {"start_iter", "2"}, {"warm_start", warm},
                             {"batch_same_shape", "1"}, {"seed", "5"}};
    auto pgs = make_groups(size);
    // Two buckets per iteration: memories are per bucket index.
    auto run_iteration = [&](std::vector<std::unique_ptr<CommHook>>& hooks, int it) {
      auto a = run_bucket(hooks, shapes, random_inputs(size, n, 6, it), 1, false);
      auto b = run_bucket(hooks, shapes, random_inputs(size, n, 7, it), 0, true);
      a.insert(a.end(), b.begin(), b.end());
      return a;
    };
    auto straight = make_hooks(pgs, options, false);
    silence(straight);
    std::vector<std::vector<Values>> expected;
    std::vector<std::string> images(size);
    for (int it = 0; it < 8; ++it) {
      if (it == 4) {
        for (int r = 0; r < size; ++r) {
          std::ostringstream out;
          ASSERT_TRUE(straight[r]->save_state(out).ok());
          images[r] = out.str();
        }
      }
      expected.push_back(run_iteration(straight, it));
    }
    // Fresh hooks with different options: the checkpoint's options win.
    auto resumed = make_hooks(pgs, {{"rank", "1"}, {"start_iter", "50"}}, false);
    silence(resumed);
    for (int r = 0; r < size; ++r) {
      std::istringstream in(images[r]);
      ASSERT_TRUE(resumed[r]->load_state(in).ok());
    }
    EXPECT_EQ(state_of(*resumed[0]).iter(), 4);
    for (int it = 4; it < 8; ++it) {
      auto got = run_iteration(resumed, it);
      for (size_t k = 0; k < got.size(); ++k)
        ASSERT_EQ(got[k], expected[it][k]) << "iteration " << it << " result " << k;
    }
  }
}

TEST(PowerSGDHook, BatchingSameShapeGivesTheSameResults) {
  const std::vector<Shape> shapes = {{10, 8}, {8, 10}, {10, 8}, {3}, {10, 8}};
  const int64_t n = total_numel(shapes);
  std::vector<std::vector<Values>> results;
  for (const char* batch : {"0", "1"}) {
    auto pgs = make_groups(2);
    auto hooks = make_hooks(pgs, {{"rank", "2"}, {"start_iter", "2"},
                                  {"batch_same_shape", batch}}, false);
    silence(hooks);
    std::vector<Values> all;
    for (int it = 0; it < 4; ++it) {
      auto out = run_bucket(hooks, shapes, random_inputs(2, n, 8, it));
      all.push_back(out[0]);
    }
    results.push_back(all);
  }
  EXPECT_EQ(results[0], results[1]);
}

TEST(PowerSGDHook, ABucketThatChangesSizeAfterStartIsAClearError) {
  auto pgs = make_groups(1);
  auto hooks = make_hooks(pgs, {{"rank", "1"}, {"start_iter", "2"}}, false);
  silence(hooks);
  const std::vector<Shape> small = {{8, 8}}, big = {{8, 9}};
  for (int it = 0; it < 3; ++it) run_bucket(hooks, small, random_inputs(1, 64, 9, it));
  GradBucket bucket = make_bucket(0, true, big, random_input(72, 9, 0, 3));
  auto result = hooks[0]->run(bucket)->result();
  ASSERT_FALSE(result.ok());
  EXPECT_EQ(result.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_NE(result.status().message().find("bucket 0 has 72 elements"), std::string::npos)
      << result.status();
}

TEST(BatchedPowerSGDHook, PadsToASquareAndTruncatesBack) {
  for (int size = 1; size <= 3; ++size) {
    SCOPED_TRACE("world size " + std::to_string(size));
    auto pgs = make_groups(size);
    // 32 elements -> 6 x 6 with 4 zeros (the last row keeps two values, so
    // the square has full rank); rank 6 is full rank: the exact average.
    auto hooks = make_hooks(pgs, {{"rank", "6"}, {"start_iter", "2"}}, true);
    silence(hooks);
    const std::vector<Shape> shapes = {{5, 4}, {12}};
    for (int it = 0; it < 4; ++it) {
      auto inputs = random_inputs(size, 32, 10, it);
      auto outputs = run_bucket(hooks, shapes, inputs);
      expect_same_on_every_rank(outputs);
      expect_near_all(outputs[0], exact_average(inputs), 1e-5,
                      "iteration " + std::to_string(it));
    }
    PowerSGDBucketMemory& memory = state_of(*hooks[0]).bucket_memory(0);
    EXPECT_EQ(memory.error.size(), 36u);  // the error covers the padded square
    EXPECT_EQ(memory.p_memory.size(), 36u);
    CompressionStats s = state_of(*hooks[0]).compression_stats();
    EXPECT_EQ(s.numel_before, 2 * 32);
    EXPECT_EQ(s.numel_after, 2 * 2 * 6 * 6);
  }
}

TEST(BatchedPowerSGDHook, RankOneIsRankOneOnThePaddedSquare) {
  auto pgs = make_groups(2);
  auto hooks = make_hooks(pgs, {{"rank", "1"}, {"start_iter", "2"},
                                {"use_error_feedback", "0"}}, true);
  silence(hooks);
  const std::vector<Shape> shapes = {{23}};  // side 5, two padding zeros
  for (int it = 0; it < 3; ++it) {
    auto outputs = run_bucket(hooks, shapes, random_inputs(2, 23, 11, it));
    if (it < 2) continue;
    // Rebuild the 5 x 5 square from the 23 values; its 2x2 minors vanish
    // wherever the truncated entries are not involved.
    const Values& m = outputs[0];
    for (int r = 1; r < 4; ++r)
      for (int c = 1; c < 5; ++c)
        EXPECT_NEAR(m[0] * m[r * 5 + c], m[c] * m[r * 5], 1e-4);
  }
}

TEST(BatchedPowerSGDHook, RankAboveTheSideIsCappedWhereTorchAsserts) {
  auto pgs = make_groups(2);
  auto hooks = make_hooks(pgs, {{"rank", "3"}, {"start_iter", "2"}}, true);
  silence(hooks);
  for (int it = 0; it < 3; ++it) {
    auto inputs = random_inputs(2, 3, 12, it);
    auto outputs = run_bucket(hooks, {{3}}, inputs);
    expect_near_all(outputs[0], exact_average(inputs), 1e-5, "rank capped to side 2");
  }
}

// Against torch's batched hook transcribed in double (batched_reference.h)
// over six compressed steps on a bucket that is not a square (970 values,
// 32 x 32 with 54 padding zeros): every step's output, each rank's error over
// the padded square and the warm-start Q. This pins what the error feedback
// adds and keeps, the padding, which factor is divided by the world size and
// the Q carried from step to step.
TEST(BatchedPowerSGDHook, FollowsTorchsBatchedHookStepByStep) {
  const int size = 2, start = 2, iterations = start + 6;
  const std::vector<Shape> shapes = {{30, 31}, {40}};
  const int64_t n = total_numel(shapes);
  struct Case { int rank; bool error_feedback; };
  for (const Case c : {Case{2, true}, Case{1, true}, Case{3, false}}) {
    SCOPED_TRACE("rank " + std::to_string(c.rank) + " error feedback " +
                 std::to_string(c.error_feedback));
    auto pgs = make_groups(size);
    auto hooks = make_hooks(pgs, {{"rank", std::to_string(c.rank)},
                                  {"start_iter", std::to_string(start)},
                                  {"use_error_feedback", c.error_feedback ? "1" : "0"}},
                            true);
    silence(hooks);
    const int64_t side = 32;
    const Values q_init = random_input(side * c.rank, 51, 0, 0);
    BatchedPowerSGDReference torch_hook(size, n, c.rank, c.error_feedback,
                                        std::vector<double>(q_init.begin(), q_init.end()));
    ASSERT_EQ(torch_hook.side(), side);
    for (int it = 0; it < iterations; ++it) {
      SCOPED_TRACE("iteration " + std::to_string(it));
      if (it == start) {  // torch's q_memory_dict, fixed on both sides
        for (auto& h : hooks) {
          PowerSGDBucketMemory& m = state_of(*h).bucket_memory(0);
          m.p_memory.assign(side * c.rank, 0.0f);
          m.q_memory = q_init;
          m.low_rank_initialized = true;
        }
      }
      // A steady low-rank part plus noise, as gradients look.
      auto inputs = random_inputs(size, n, 52, it);
      for (Values& in : inputs)
        for (int64_t i = 0; i < n; ++i) in[i] = 0.3f * in[i] + std::sin(0.01f * i) * (i % 7);
      auto outputs = run_bucket(hooks, shapes, inputs);
      expect_same_on_every_rank(outputs);
      if (it < start) {
        expect_near_all(outputs[0], exact_average(inputs), 1e-6, "plain allreduce");
        continue;
      }
      const std::vector<double> want = torch_hook.step(inputs);
      double largest = 0;
      for (double v : want) largest = std::max(largest, std::fabs(v));
      for (int64_t i = 0; i < n; ++i)
        ASSERT_NEAR(outputs[0][i], want[i], 1e-4 * largest) << "output [" << i << "]";
      for (int r = 0; r < size; ++r) {
        const Values& error = state_of(*hooks[r]).bucket_memory(0).error;
        ASSERT_EQ(error.size(), c.error_feedback ? size_t(side * side) : 0u);
        for (size_t i = 0; i < error.size(); ++i)
          ASSERT_NEAR(error[i], torch_hook.error(r)[i], 1e-4 * largest)
              << "rank " << r << " error [" << i << "]" << (int64_t(i) >= n ? " (padding)" : "");
      }
      const Values& q = state_of(*hooks[0]).bucket_memory(0).q_memory;
      ASSERT_EQ(q.size(), torch_hook.q_memory().size());
      for (size_t i = 0; i < q.size(); ++i)
        ASSERT_NEAR(q[i], torch_hook.q_memory()[i], 1e-4 * largest) << "Q [" << i << "]";
    }
  }
}

// What the per-tensor hook's ErrorFeedbackCarriesWhatCompressionDropped
// checks, on the padded square: on every rank sum(applied) = sum(own inputs)
// - final error, so sum(true averages) - sum(applied) is the mean final error
// on the bucket's part of the square, over 30 compressed rank-1 steps.
TEST(BatchedPowerSGDHook, ErrorFeedbackCarriesWhatCompressionDropped) {
  const int size = 2, iterations = 32;
  const std::vector<Shape> shapes = {{20, 17}, {9}};  // 349 values, side 19
  const int64_t n = total_numel(shapes);
  auto pgs = make_groups(size);
  auto hooks = make_hooks(pgs, {{"rank", "1"}, {"start_iter", "2"}}, true);
  silence(hooks);
  std::vector<double> shortfall(n, 0.0);
  for (int it = 0; it < iterations; ++it) {
    auto inputs = random_inputs(size, n, 53, it);
    auto outputs = run_bucket(hooks, shapes, inputs);
    const Values avg = exact_average(inputs);
    for (int64_t i = 0; i < n; ++i) shortfall[i] += double(avg[i]) - outputs[0][i];
  }
  const Values& e0 = state_of(*hooks[0]).bucket_memory(0).error;
  const Values& e1 = state_of(*hooks[1]).bucket_memory(0).error;
  ASSERT_EQ(e0.size(), 19u * 19u);
  double shortfall_norm = 0;
  for (int64_t i = 0; i < n; ++i) {
    EXPECT_NEAR(shortfall[i], (double(e0[i]) + e1[i]) / size, 1e-3) << i;
    shortfall_norm += shortfall[i] * shortfall[i];
  }
  // Rank 1 of a 19 x 19 noise square drops most of it: the error is large.
  EXPECT_GT(std::sqrt(shortfall_norm), 1.0);
}

}  // namespace
}  // namespace ddpx
