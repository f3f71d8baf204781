// Hooks by name: parsing, composition, errors that list what exists, and
// every registered hook averaging a bucket on two real Gloo ranks.
#include "hooks/registry.h"

#include <cmath>
#include <vector>

#include "gtest/gtest.h"
#include "hooks/hook_stats.h"
#include "tests/hooks/hook_test_util.h"
#include "tests/rank_threads.h"

namespace ddpx {
namespace {

using hook_test::bucket_of;
using rank_threads::run_groups;
using hook_test::values_of;

TEST(HookSpec, ParsesPartsAndOptions) {
  auto parts = parse_hook_spec("fp16+powersgd:rank=2,start_iter=10");
  ASSERT_TRUE(parts.ok()) << parts.status();
  ASSERT_EQ(parts->size(), 2u);
  EXPECT_EQ((*parts)[0].name, "fp16");
  EXPECT_TRUE((*parts)[0].options.empty());
  EXPECT_EQ((*parts)[1].name, "powersgd");
  EXPECT_EQ((*parts)[1].options.at("rank"), "2");
  EXPECT_EQ((*parts)[1].options.at("start_iter"), "10");
}

TEST(HookSpec, MalformedSpecsAreErrorsQuotingThem) {
  for (const char* bad : {"", "fp16+", "int8:hierarchical", "int8:=1", "int8:a=1,a=2"}) {
    auto parts = parse_hook_spec(bad);
    EXPECT_FALSE(parts.ok()) << "'" << bad << "' parsed";
  }
  EXPECT_NE(parse_hook_spec("int8:a=1,a=2").status().message().find("given twice"),
            absl::string_view::npos);
}

TEST(Registry, KnowsEveryHook) {
  std::vector<std::string> names = comm_hook_names();
  for (const char* n : {"allreduce", "fp16", "bf16", "noop", "int8", "powersgd",
                        "batched_powersgd"}) {
    EXPECT_NE(std::find(names.begin(), names.end(), n), names.end()) << n;
  }
}

TEST(Registry, ErrorsNameTheProblemAndListWhatExists) {
  run_groups(1, [&](int, std::shared_ptr<ProcessGroup> pg) {
    auto unknown = make_comm_hook("fp32", pg);
    ASSERT_FALSE(unknown.ok());
    std::string m(unknown.status().message());
    EXPECT_NE(m.find("unknown hook 'fp32'"), std::string::npos) << m;
    EXPECT_NE(m.find("allreduce, batched_powersgd, bf16, fp16, int8, noop, powersgd"),
              std::string::npos) << m;

    auto not_wrapper = make_comm_hook("powersgd+fp16", pg);
    ASSERT_FALSE(not_wrapper.ok());
    EXPECT_NE(not_wrapper.status().message().find("'powersgd'"), absl::string_view::npos);

    auto option = make_comm_hook("fp16:scale=2", pg);
    ASSERT_FALSE(option.ok());
    EXPECT_NE(option.status().message().find("takes no options"), absl::string_view::npos);

    auto int8_option = make_comm_hook("int8:levels=16", pg);
    ASSERT_FALSE(int8_option.ok());
    EXPECT_NE(int8_option.status().message().find("hierarchical, local_size"),
              absl::string_view::npos) << int8_option.status();

    auto psgd_option = make_comm_hook("powersgd:rnk=2", pg);
    ASSERT_FALSE(psgd_option.ok());
    EXPECT_NE(psgd_option.status().message().find("rnk"), absl::string_view::npos)
        << psgd_option.status();
  });
  auto no_group = make_comm_hook("fp16", nullptr);
  EXPECT_FALSE(no_group.ok());
}

struct Case {
  const char* spec;
  const char* name;   // the built hook's name()
  double tolerance;   // relative to the largest |average|
};

TEST(Registry, EveryHookAveragesOnTwoRanks) {
  const std::vector<Case> cases = {
      {"allreduce", "allreduce", 1e-7},
      {"fp16", "fp16", 1e-3},
      {"bf16", "bf16", 1e-2},
      {"int8", "int8", 2.0 / 255},
      {"int8:hierarchical=1,local_size=2", "int8:hierarchical", 2.0 / 255},
      {"int8:hierarchical=1,local_size=1", "int8:hierarchical", 2.0 / 255},
      {"powersgd:rank=2,start_iter=10", "powersgd", 1e-7},
      {"batched_powersgd:rank=4", "batched_powersgd", 1e-7},
      {"bf16+allreduce", "bf16+allreduce", 1e-2},
  };
  const int64_t n = 300;
  auto grad = [&](int rank) {
    std::vector<float> g(n);
    for (int64_t i = 0; i < n; ++i) g[i] = std::sin(0.1f * i + rank) * (1 + rank);
    return g;
  };
  for (const Case& c : cases) {
    std::vector<std::vector<float>> results(2);
    run_groups(2, [&](int, std::shared_ptr<ProcessGroup> pg) {
      auto hook = make_comm_hook(c.spec, pg);
      ASSERT_TRUE(hook.ok()) << c.spec << ": " << hook.status();
      EXPECT_EQ((*hook)->name(), c.name);
      Tensor buffer = Tensor::from_vector(grad(pg->rank()), {10, 30});
      GradBucket bucket(0, true, buffer.flatten(), {0}, {{10, 30}}, {buffer});
      results[pg->rank()] = values_of((*hook)->run(bucket));
    });
    ASSERT_EQ(results[0].size(), static_cast<size_t>(n)) << c.spec;
    EXPECT_EQ(results[0], results[1]) << c.spec;
    std::vector<float> a = grad(0), b = grad(1);
    for (int64_t i = 0; i < n; ++i) {
      ASSERT_NEAR(results[0][i], (a[i] + b[i]) / 2, c.tolerance * 2) << c.spec << " " << i;
    }
  }
}

// The registry composes the wrapper around PowerSGD; the compressed steps of
// fp16+powersgd are checked in tests/hooks/powersgd:powersgd_half_test.
TEST(Registry, Fp16WrapperComposesWithPowerSGD) {
  run_groups(1, [&](int, std::shared_ptr<ProcessGroup> pg) {
    auto hook = make_comm_hook("fp16+powersgd:rank=2,start_iter=10", pg);
    ASSERT_TRUE(hook.ok()) << hook.status();
    EXPECT_EQ((*hook)->name(), "fp16+powersgd");
  });
}

TEST(Registry, NoopIsBuiltByNameAndCounts) {
  run_groups(1, [&](int, std::shared_ptr<ProcessGroup> pg) {
    auto hook = make_comm_hook("noop", pg);
    ASSERT_TRUE(hook.ok());
    GradBucket bucket = bucket_of({1, 2, 3});
    EXPECT_EQ(values_of((*hook)->run(bucket)), (std::vector<float>{1, 2, 3}));
    EXPECT_EQ(comm_hook_stats(**hook).calls, 1u);
  });
}

TEST(Registry, NoopTakesSyncAndNamesABadOption) {
  run_groups(1, [&](int, std::shared_ptr<ProcessGroup> pg) {
    auto hook = make_comm_hook("noop:sync=1", pg);
    ASSERT_TRUE(hook.ok()) << hook.status();
    uint64_t ops_before = pg->counters().ops.load();
    GradBucket bucket = bucket_of({1, 2, 3});
    EXPECT_EQ(values_of((*hook)->run(bucket)), (std::vector<float>{1, 2, 3}));
    EXPECT_EQ(pg->counters().ops.load(), ops_before + 1);  // its barrier
    auto bad_value = make_comm_hook("noop:sync=2", pg);
    ASSERT_FALSE(bad_value.ok());
    EXPECT_NE(bad_value.status().message().find("noop hook: option sync='2' is not a boolean"),
              std::string::npos)
        << bad_value.status();
    auto bad_key = make_comm_hook("noop:wait=1", pg);
    ASSERT_FALSE(bad_key.ok());
    EXPECT_NE(bad_key.status().message().find("unknown option 'wait'"), std::string::npos)
        << bad_key.status();
  });
}

}  // namespace
}  // namespace ddpx
