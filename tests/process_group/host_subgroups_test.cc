// host_placement() and host_subgroups() (process_group/rendezvous/init.h) on real
// ranks: threads of this process over one store, Gloo over loopback TCP,
// with the hosts each rank claims (GlooOptions::host_identity) or, for a
// backend that knows no hosts, LOCAL_WORLD_SIZE.
#include <cstdlib>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "process_group/rendezvous/init.h"
#include "tests/rank_threads.h"

namespace ddpx {
namespace {

using ::testing::HasSubstr;

using rank_threads::kTimeout;

// Runs body(group) on one thread per entry of `hosts`, rank r claiming to be
// on host hosts[r].
void on_hosts(const std::vector<std::string>& hosts,
              const std::function<void(std::shared_ptr<ProcessGroup>)>& body) {
  rank_threads::GroupOptions o = rank_threads::gloo_groups(rank_threads::local_gloo_options());
  o.gloo->shared_memory = true;
  o.gloo_for_rank = [&](int rank, GlooOptions& g) { g.host_identity = hosts[rank]; };
  rank_threads::run_groups(static_cast<int>(hosts.size()),
                           [&](int, std::shared_ptr<ProcessGroup> pg) { body(std::move(pg)); },
                           o);
}

// The parent ranks of every member of `sub`, in `sub`'s rank order.
std::vector<int> members(ProcessGroup& sub, int parent_rank) {
  Tensor all = Tensor::zeros({sub.size()}, DType::kInt32);
  Tensor mine = Tensor::from_vector(std::vector<int32_t>{parent_rank});
  EXPECT_TRUE(sub.allgather_into_tensor(all, mine)->wait(kTimeout).ok());
  std::vector<int> out;
  for (int i = 0; i < sub.size(); ++i) out.push_back(static_cast<int>(all.item(i)));
  return out;
}

// Two hosts of two ranks, interleaved: ranks 0 and 2 on one, 1 and 3 on the
// other.
TEST(HostSubgroups, PerHostAndCrossHostGroupsFromTheBackendsHosts) {
  on_hosts({"a", "b", "a", "b"}, [](std::shared_ptr<ProcessGroup> pg) {
    const int rank = pg->rank();
    absl::StatusOr<HostPlacement> place = host_placement(*pg);
    ASSERT_TRUE(place.ok()) << place.status();
    EXPECT_EQ(place->host_count, 2);
    EXPECT_EQ(place->host_index, rank % 2);
    EXPECT_EQ(place->local_rank, rank / 2);
    EXPECT_EQ(place->local_size, 2);

    auto groups = host_subgroups(*pg);
    ASSERT_TRUE(groups.ok()) << groups.status();
    const HostSubgroups& g = **groups;
    EXPECT_EQ(g.local->rank(), rank / 2);
    EXPECT_EQ(g.cross->rank(), rank % 2);
    EXPECT_EQ(members(*g.local, rank), rank % 2 == 0 ? std::vector<int>({0, 2})
                                                     : std::vector<int>({1, 3}));
    EXPECT_EQ(members(*g.cross, rank), rank < 2 ? std::vector<int>({0, 1})
                                                : std::vector<int>({2, 3}));
  });
}

// Built once per group: later calls return the same groups; another local
// size builds its own (every rank asks in the same order); the groups go
// with their parent unless someone else holds them.
TEST(HostSubgroups, BuiltOnceAndKeptByTheGroup) {
  on_hosts({"a", "a", "a", "a"}, [](std::shared_ptr<ProcessGroup> pg) {
    auto first = host_subgroups(*pg);
    ASSERT_TRUE(first.ok()) << first.status();
    EXPECT_EQ((*first)->local->size(), 4);
    EXPECT_EQ((*first)->cross->size(), 1);
    auto again = host_subgroups(*pg);
    ASSERT_TRUE(again.ok());
    EXPECT_EQ(again->get(), first->get());

    auto pairs = host_subgroups(*pg, 2);
    ASSERT_TRUE(pairs.ok()) << pairs.status();
    EXPECT_NE(pairs->get(), first->get());
    EXPECT_EQ(members(*(*pairs)->local, pg->rank()),
              pg->rank() < 2 ? std::vector<int>({0, 1}) : std::vector<int>({2, 3}));
    EXPECT_EQ(members(*(*pairs)->cross, pg->rank()),
              pg->rank() % 2 == 0 ? std::vector<int>({0, 2}) : std::vector<int>({1, 3}));
    EXPECT_EQ(host_subgroups(*pg, 2)->get(), pairs->get());

    std::weak_ptr<ProcessGroup> local = (*first)->local;
    std::shared_ptr<ProcessGroup> kept = (*pairs)->cross;
    first = absl::StatusOr<std::shared_ptr<const HostSubgroups>>();
    again = first;
    pairs = first;
    pg.reset();
    EXPECT_TRUE(local.expired()) << "the parent's subgroups went with it";
    Tensor one = Tensor::from_vector(std::vector<float>{1.0f});
    EXPECT_TRUE(kept->allreduce({one})->wait(kTimeout).ok());
    EXPECT_EQ(one.item(0), 2.0);
  });
}

TEST(HostSubgroups, HostsWithDifferentRankCountsAreAClearError) {
  on_hosts({"a", "a", "b"}, [](std::shared_ptr<ProcessGroup> pg) {
    auto groups = host_subgroups(*pg);
    ASSERT_FALSE(groups.ok());
    EXPECT_EQ(groups.status().code(), absl::StatusCode::kFailedPrecondition);
    EXPECT_THAT(std::string(groups.status().message()),
                HasSubstr("hosts of this group hold different numbers of ranks"));
    // Consecutive ranks instead, by request: 3 is not a multiple of 2.
    auto bad = host_placement(*pg, 2);
    ASSERT_FALSE(bad.ok());
    EXPECT_THAT(std::string(bad.status().message()),
                HasSubstr("local size 2 (local_size) must be positive and divide the group "
                          "size 3"));
  });
}

// A backend that knows no hosts: LOCAL_WORLD_SIZE says how many consecutive
// ranks share one (the launcher's numbering), and nothing else reads it.
class NoHostsBackend : public Backend {
 public:
  explicit NoHostsBackend(std::shared_ptr<Backend> inner)
      : Backend(inner->rank(), inner->size()), inner_(std::move(inner)) {}
  std::string name() const override { return inner_->name(); }
#define DDPX_FORWARD(method, Params, Args) \
  std::shared_ptr<Work> method Params override { return inner_->method Args; }
  DDPX_FORWARD(allreduce, (const TensorList& t, const AllreduceOptions& o), (t, o))
  DDPX_FORWARD(allreduce_coalesced, (const TensorList& t, const AllreduceOptions& o), (t, o))
  DDPX_FORWARD(broadcast, (const TensorList& t, const BroadcastOptions& o), (t, o))
  DDPX_FORWARD(reduce, (const TensorList& t, const ReduceOptions& o), (t, o))
  DDPX_FORWARD(allgather,
               (const std::vector<TensorList>& out, const TensorList& in,
                const AllgatherOptions& o),
               (out, in, o))
  DDPX_FORWARD(allgather_into_tensor,
               (const Tensor& out, const Tensor& in, const AllgatherOptions& o), (out, in, o))
  DDPX_FORWARD(reduce_scatter,
               (const TensorList& out, const std::vector<TensorList>& in,
                const ReduceScatterOptions& o),
               (out, in, o))
  DDPX_FORWARD(reduce_scatter_tensor,
               (const Tensor& out, const Tensor& in, const ReduceScatterOptions& o),
               (out, in, o))
  DDPX_FORWARD(gather,
               (const std::vector<TensorList>& out, const TensorList& in,
                const GatherOptions& o),
               (out, in, o))
  DDPX_FORWARD(scatter,
               (const TensorList& out, const std::vector<TensorList>& in,
                const ScatterOptions& o),
               (out, in, o))
  DDPX_FORWARD(alltoall, (const TensorList& out, const TensorList& in, const AllToAllOptions& o),
               (out, in, o))
  DDPX_FORWARD(alltoall_base,
               (const Tensor& out, const Tensor& in, const std::vector<int64_t>& os,
                const std::vector<int64_t>& is, const AllToAllOptions& o),
               (out, in, os, is, o))
  DDPX_FORWARD(barrier, (const BarrierOptions& o), (o))
  DDPX_FORWARD(monitored_barrier, (const BarrierOptions& o, bool all), (o, all))
  DDPX_FORWARD(send, (const TensorList& t, int dst, const SendRecvOptions& o), (t, dst, o))
  DDPX_FORWARD(recv, (const TensorList& t, int src, const SendRecvOptions& o), (t, src, o))
  DDPX_FORWARD(recv_anysource, (const TensorList& t, const SendRecvOptions& o), (t, o))
#undef DDPX_FORWARD

 private:
  std::shared_ptr<Backend> inner_;
};

TEST(HostSubgroups, WithoutHostsFromTheBackendLocalWorldSizeDecides) {
  std::vector<std::shared_ptr<ProcessGroup>> groups;
  for (const auto& g : rank_threads::make_groups(4)) {
    groups.push_back(std::make_shared<ProcessGroup>(std::make_shared<NoHostsBackend>(g->backend()),
                                                    g->store(), g->timeout()));
  }
  ASSERT_EQ(groups[0]->host_topology(), nullptr);

  unsetenv("LOCAL_WORLD_SIZE");
  auto missing = host_placement(*groups[0]);
  ASSERT_FALSE(missing.ok());
  EXPECT_THAT(std::string(missing.status().message()),
              HasSubstr("does not know its hosts: set LOCAL_WORLD_SIZE"));
  setenv("LOCAL_WORLD_SIZE", "two", 1);
  EXPECT_THAT(std::string(host_placement(*groups[0]).status().message()),
              HasSubstr("LOCAL_WORLD_SIZE='two' is not an integer"));

  setenv("LOCAL_WORLD_SIZE", "2", 1);
  rank_threads::on_every_rank(4, [&](int r) {
    auto subgroups = host_subgroups(*groups[r]);
    ASSERT_TRUE(subgroups.ok()) << subgroups.status();
    EXPECT_EQ((*subgroups)->placement.host_index, r / 2);
    EXPECT_EQ(members(*(*subgroups)->local, r),
              r < 2 ? std::vector<int>({0, 1}) : std::vector<int>({2, 3}));
    EXPECT_EQ(members(*(*subgroups)->cross, r),
              r % 2 == 0 ? std::vector<int>({0, 2}) : std::vector<int>({1, 3}));
  });
  unsetenv("LOCAL_WORLD_SIZE");
}

}  // namespace
}  // namespace ddpx
