// --comm_trace: every rank records, per step, when each bucket entered the
// communication hook and when each collective was called and completed, on
// the host's monotonic clock; examples/benchmarks/comm_time.py turns them
// into communication time per step. Also: --lr_schedule=cosine reaches the
// optimizer (the logged lr falls to ~0 on the last step).
#include <cstdio>
#include <sstream>
#include <string>
#include <vector>

#include "gtest/gtest.h"
#include "tests/integration/train_runner.h"

namespace ddpx::integration_test {
namespace {

constexpr int kSteps = 30;

struct Span {
  int64_t id, enter, done;
};
struct TraceLine {
  int64_t step = 0;
  std::vector<Span> spans, collectives;
};

// Parses the "[[a,b,c],...]" after `key` in one trace line.
std::vector<Span> parse_spans(const std::string& line, const std::string& key) {
  std::vector<Span> out;
  size_t at = line.find("\"" + key + "\":[");
  EXPECT_NE(at, std::string::npos) << key << " missing in " << line;
  if (at == std::string::npos) return out;
  at += key.size() + 4;
  while (at < line.size() && line[at] == '[') {
    Span s;
    EXPECT_EQ(sscanf(line.c_str() + at, "[%ld,%ld,%ld]", &s.id, &s.enter, &s.done), 3) << line;
    out.push_back(s);
    at = line.find(']', at) + 1;
    if (line[at] == ',') ++at;
  }
  return out;
}

std::vector<TraceLine> read_trace(const std::string& path) {
  std::vector<TraceLine> out;
  std::istringstream in(read_file(path));
  for (std::string line; std::getline(in, line);) {
    TraceLine t;
    EXPECT_EQ(sscanf(line.c_str(), "{\"step\":%ld", &t.step), 1) << line;
    t.spans = parse_spans(line, "spans");
    t.collectives = parse_spans(line, "collectives");
    out.push_back(t);
  }
  return out;
}

struct TraceCase {
  std::string hook;
  bool several_collectives_per_bucket;  // PowerSGD: P and Q, and rank-1 tensors
};

class CommTraceTest : public ::testing::TestWithParam<TraceCase> {};

TEST_P(CommTraceTest, EveryRankStampsBucketsAndCollectivesOfEveryStep) {
  const TraceCase& c = GetParam();
  const std::string dir = fresh_dir("trace_" + c.hook.substr(0, c.hook.find(':')));
  RunResult r = run_command(std::string(kTrainBinary) +
                            " --nproc=2 --hidden=128 --batch_size=32 --log_every=100"
                            " --max_steps=" + std::to_string(kSteps) + " --hook='" + c.hook +
                            "' --lr_schedule=cosine --metrics_out=" + dir +
                            "/metrics.jsonl --comm_trace=" + dir + "/trace");
  ASSERT_EQ(r.exit_code, 0) << r.output;

  std::vector<TraceLine> ranks[2] = {read_trace(dir + "/trace.rank0"),
                                     read_trace(dir + "/trace.rank1")};
  for (int rank = 0; rank < 2; ++rank) {
    ASSERT_EQ(ranks[rank].size(), size_t(kSteps)) << "rank " << rank;
    for (int i = 0; i < kSteps; ++i) {
      const TraceLine& t = ranks[rank][i];
      SCOPED_TRACE("rank " + std::to_string(rank) + " step " + std::to_string(t.step));
      EXPECT_EQ(t.step, i + 1);
      ASSERT_FALSE(t.spans.empty());
      ASSERT_FALSE(t.collectives.empty());
      for (const Span& s : t.spans) EXPECT_LE(s.enter, s.done);
      // Step 1 also holds DDP's initial broadcast and its bucket rebuild
      // (which need not have completed when the step ends); from step 2 on
      // every collective completed and ran inside the step's hook calls.
      for (const Span& s : t.collectives) {
        EXPECT_GT(s.enter, 0);
        if (t.step == 1) continue;
        EXPECT_LE(s.enter, s.done);
        EXPECT_GE(s.enter, t.spans.front().enter);
        EXPECT_LE(s.done, t.spans.back().done);
      }
      if (t.step > 10) {  // PowerSGD compresses from step 10 (start_iter)
        if (c.several_collectives_per_bucket) {
          EXPECT_GE(t.collectives.size(), 2 * t.spans.size());
        } else {
          EXPECT_EQ(t.collectives.size(), t.spans.size());
        }
      }
    }
    // The same operations on both ranks, step by step.
    for (int i = 0; i < kSteps; ++i) {
      EXPECT_EQ(ranks[0][i].collectives.size(), ranks[1][i].collectives.size()) << i;
    }
  }

  // comm_time.py: "collective_s hook_s collectives_per_step", with the
  // collectives' time inside the hooks' time.
  RunResult py = run_command("python3 examples/benchmarks/comm_time.py " + dir +
                             "/trace 2 10");
  ASSERT_EQ(py.exit_code, 0) << py.output;
  double collective = -1, hook = -1, count = -1;
  ASSERT_EQ(sscanf(py.output.c_str(), "%lf %lf %lf", &collective, &hook, &count), 3)
      << py.output;
  EXPECT_GT(collective, 0);
  EXPECT_LE(collective, hook * 1.0001 + 1e-6);
  EXPECT_LT(hook, 5.0);
  EXPECT_EQ(count, double(ranks[0].back().collectives.size()));

  std::vector<MetricsLine> steps = lines_of_type(read_metrics(dir + "/metrics.jsonl"), "step");
  ASSERT_EQ(steps.size(), size_t(kSteps));
  EXPECT_FLOAT_EQ(number(steps.front(), "lr"), 0.05f);
  EXPECT_LT(number(steps.back(), "lr"), 0.05 * 0.01);
}

INSTANTIATE_TEST_SUITE_P(Hooks, CommTraceTest,
                         ::testing::Values(TraceCase{"allreduce", false},
                                           TraceCase{"powersgd:rank=2,start_iter=10", true}),
                         [](const ::testing::TestParamInfo<TraceCase>& info) {
                           return std::string(info.param.several_collectives_per_bucket
                                                  ? "powersgd"
                                                  : "allreduce");
                         });

}  // namespace
}  // namespace ddpx::integration_test
