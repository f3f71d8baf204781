// round_robin:gloo*2 gives the same results as plain gloo, really alternates
// between its members, and refuses point-to-point ops.
#include "process_group/round_robin.h"

#include <random>
#include <string>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "process_group/rendezvous/init.h"
#include "tests/rank_threads.h"

namespace ddpx {
namespace {

using ::testing::HasSubstr;
using rank_threads::make_groups;
using rank_threads::on_every_rank;

constexpr int kRanks = 3;

Tensor random_tensor(DType dtype, int64_t n, uint32_t seed) {
  std::mt19937 gen(seed);
  Tensor t = Tensor::zeros({n}, dtype);
  if (dtype == DType::kFloat32) {
    std::normal_distribution<float> d;
    for (int64_t i = 0; i < n; ++i) t.data_as<float>()[i] = d(gen);
  } else if (dtype == DType::kFloat64) {
    std::normal_distribution<double> d;
    for (int64_t i = 0; i < n; ++i) t.data_as<double>()[i] = d(gen);
  } else {
    std::uniform_int_distribution<int64_t> d(-1000, 1000);
    for (int64_t i = 0; i < n; ++i) t.data_as<int64_t>()[i] = d(gen);
  }
  return t;
}

// The outputs of a fixed script of collectives on one rank.
std::vector<Tensor> run_script(ProcessGroup& pg) {
  const int r = pg.rank();
  std::vector<Tensor> out;
  auto done = [&](std::shared_ptr<Work> w) {
    absl::Status s = w->wait();
    EXPECT_TRUE(s.ok()) << pg.backend_name() << ": " << s;
  };
  Tensor a = random_tensor(DType::kFloat32, 4099, 10 + r);
  done(pg.allreduce({a}));
  out.push_back(a);
  Tensor b = random_tensor(DType::kFloat64, 300, 20 + r);
  AllreduceOptions avg;
  avg.op = ReduceOp::AVG;
  done(pg.allreduce({b}, avg));
  out.push_back(b);
  Tensor c = random_tensor(DType::kInt64, 77, 30 + r);
  AllreduceOptions mx;
  mx.op = ReduceOp::MAX;
  done(pg.allreduce({c}, mx));
  out.push_back(c);
  Tensor d = random_tensor(DType::kFloat32, 500, 40 + r);
  BroadcastOptions bo;
  bo.root_rank = 2;
  done(pg.broadcast({d}, bo));
  out.push_back(d);
  Tensor e_in = random_tensor(DType::kFloat32, 10, 50 + r);
  Tensor e_out = Tensor::zeros({10 * kRanks}, DType::kFloat32);
  done(pg.allgather_into_tensor(e_out, e_in));
  out.push_back(e_out);
  Tensor f_in = random_tensor(DType::kFloat64, 6 * kRanks, 60 + r);
  Tensor f_out = Tensor::zeros({6}, DType::kFloat64);
  done(pg.reduce_scatter_tensor(f_out, f_in));
  out.push_back(f_out);
  TensorList g = {random_tensor(DType::kFloat32, 3, 70 + r),
                  random_tensor(DType::kFloat32, 1000, 80 + r)};
  done(pg.allreduce_coalesced(g));
  out.insert(out.end(), g.begin(), g.end());
  Tensor h_in = random_tensor(DType::kInt64, 4 * kRanks, 90 + r);
  Tensor h_out = Tensor::zeros({4 * kRanks}, DType::kInt64);
  done(pg.alltoall_base(h_out, h_in));
  out.push_back(h_out);
  done(pg.barrier());
  return out;
}

std::vector<std::vector<Tensor>> run_everywhere(
    const std::vector<std::shared_ptr<ProcessGroup>>& groups) {
  std::vector<std::vector<Tensor>> out(groups.size());
  on_every_rank(static_cast<int>(groups.size()),
                [&](int r) { out[r] = run_script(*groups[r]); });
  return out;
}

TEST(RoundRobin, SameResultsAsGlooAndAlternates) {
  auto gloo = make_groups(kRanks, "gloo");
  auto rr = make_groups(kRanks, "round_robin:gloo*2");
  ASSERT_EQ(rr[0]->backend_name(), "round_robin:gloo*2");

  std::vector<std::vector<Tensor>> want = run_everywhere(gloo);
  std::vector<std::vector<Tensor>> got = run_everywhere(rr);
  for (int r = 0; r < kRanks; ++r) {
    ASSERT_EQ(want[r].size(), got[r].size());
    for (size_t i = 0; i < want[r].size(); ++i) {
      ASSERT_EQ(want[r][i].nbytes(), got[r][i].nbytes());
      EXPECT_EQ(memcmp(want[r][i].data(), got[r][i].data(), want[r][i].nbytes()), 0)
          << "rank " << r << " output " << i << " differs from gloo's";
    }
  }
  // The script issued 9 collectives: members took turns.
  for (int r = 0; r < kRanks; ++r) {
    auto* backend = dynamic_cast<RoundRobinBackend*>(rr[r]->backend().get());
    ASSERT_NE(backend, nullptr);
    ASSERT_EQ(backend->backends().size(), 2u);
    EXPECT_EQ(backend->dispatched(0), 5u);
    EXPECT_EQ(backend->dispatched(1), 4u);
    EXPECT_NE(backend->backends()[0], backend->backends()[1]);
  }
}

// Two collectives in flight at once land on different members and both
// complete correctly.
TEST(RoundRobin, ConcurrentCollectivesOnDifferentMembers) {
  auto rr = make_groups(2, "round_robin:gloo*2");
  std::vector<Tensor> x(2), y(2);
  on_every_rank(2, [&](int r) {
    x[r] = Tensor::from_vector<float>({1.f + r, 10});
    y[r] = Tensor::from_vector<int32_t>({r, 100});
    std::shared_ptr<Work> wx = rr[r]->allreduce({x[r]});
    std::shared_ptr<Work> wy = rr[r]->allreduce({y[r]});
    EXPECT_TRUE(wy->wait().ok());
    EXPECT_TRUE(wx->wait().ok());
  });
  EXPECT_EQ(x[0].item(0), 3);
  EXPECT_EQ(x[1].item(1), 20);
  EXPECT_EQ(y[0].item(0), 1);
  EXPECT_EQ(y[1].item(1), 200);
}

TEST(RoundRobin, RefusesPointToPoint) {
  auto rr = make_groups(2, "round_robin:gloo*2");
  Tensor t = Tensor::zeros({1}, DType::kFloat32);
  std::shared_ptr<Work> w = rr[0]->send({t}, 1);
  ASSERT_TRUE(w->is_completed());
  EXPECT_EQ(w->exception().code(), absl::StatusCode::kUnimplemented);
  EXPECT_THAT(std::string(w->exception().message()),
              HasSubstr("send: the round_robin:gloo*2 backend does not support "
                        "point-to-point ops"));
  EXPECT_THAT(std::string(rr[1]->recv({t}, 0)->exception().message()),
              HasSubstr("recv: the round_robin:gloo*2 backend"));
  EXPECT_THAT(std::string(rr[1]->recv_anysource({t})->exception().message()),
              HasSubstr("recv_anysource: the round_robin:gloo*2 backend"));
}

TEST(RoundRobin, MembersMustShareRankAndSize) {
  auto gloo = make_groups(2, "gloo");
  absl::StatusOr<std::shared_ptr<RoundRobinBackend>> rr =
      RoundRobinBackend::create({gloo[0]->backend(), gloo[1]->backend()});
  EXPECT_EQ(std::string(rr.status().message()),
            "round_robin: backend 1 (gloo) is rank 1 of 2, expected rank 0 of 2 like "
            "backend 0 (gloo)");
  EXPECT_THAT(std::string(RoundRobinBackend::create({}).status().message()),
              HasSubstr("needs at least one backend"));
  rr = RoundRobinBackend::create({gloo[0]->backend(), gloo[0]->backend()});
  ASSERT_TRUE(rr.ok());
  EXPECT_EQ((*rr)->name(), "round_robin:gloo*2");
}

}  // namespace
}  // namespace ddpx
