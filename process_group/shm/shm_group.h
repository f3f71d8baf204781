// The shared-memory segments of one process group whose ranks share a host:
// each rank creates one segment (layout.h) with a channel per backend worker
// and maps every peer's.
//
//   auto group = ShmGroup::create(store, "gloo/3/", rank, size, options, all_agree);
//   if (group.ok()) shm::allreduce((*group)->channel(worker), ...);
//
// create() is collective: every rank of the group calls it, and either all
// get a group or all get an error (the ranks agree through `all_agree`
// after each step that can fail on one rank only), so no rank ever waits on
// a peer that fell back to TCP.
#ifndef DDPX_PROCESS_GROUP_SHM_SHM_GROUP_H_
#define DDPX_PROCESS_GROUP_SHM_SHM_GROUP_H_

#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "process_group/shm/abort_signal.h"
#include "process_group/shm/channel.h"
#include "process_group/shm/segment.h"
#include "store/store.h"

namespace ddpx {
namespace shm {

struct ShmOptions {
  int num_channels = 2;
  // Staging per channel: num_slots slots of slot_bytes (a multiple of 4 KiB).
  // Consecutive chunks of an op use different slots, so num_slots >= 2
  // pipelines them.
  int num_slots = 4;
  size_t slot_bytes = 256 << 10;
};

class ShmGroup {
 public:
  // true when every rank passed true; the same answer on every rank.
  using AllAgree = std::function<bool(bool ok)>;

  // `key_prefix` must be unique to this group in `store` (the job token is
  // stored under it). The error says which step failed and why.
  static absl::StatusOr<std::unique_ptr<ShmGroup>> create(Store& store,
                                                          const std::string& key_prefix,
                                                          int rank, int size,
                                                          const ShmOptions& options,
                                                          const AllAgree& all_agree);
  ShmGroup(const ShmGroup&) = delete;
  ShmGroup& operator=(const ShmGroup&) = delete;

  Channel& channel(int i) { return *channels_[i]; }
  int num_channels() const { return static_cast<int>(channels_.size()); }
  // This rank's segment's name (unlinked by the time create() returns).
  const std::string& segment_name() const { return segments_[rank_].name(); }
  size_t segment_bytes() const { return segments_[rank_].size(); }
  // Makes every op waiting on a peer, now or later, fail with `why`
  // (AbortSignal): callable from any thread.
  void abort(const absl::Status& why, int culprit) { abort_.raise(why, culprit); }

 private:
  ShmGroup(int rank) : rank_(rank) {}

  const int rank_;
  std::vector<Segment> segments_;  // [rank]; this rank's is the one it created
  std::vector<PeerLiveness> liveness_;  // [rank]; this rank's watches nothing
  AbortSignal abort_;  // before channels_, which point to it
  std::vector<std::unique_ptr<Channel>> channels_;
};

}  // namespace shm
}  // namespace ddpx

#endif  // DDPX_PROCESS_GROUP_SHM_SHM_GROUP_H_
