#include "process_group/shm/shm_group.h"

#include <sched.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstring>
#include <mutex>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "process_group/shm/layout.h"

namespace ddpx {
namespace shm {
namespace {

uint64_t pid_namespace() {
  struct stat st {};
  return stat("/proc/self/ns/pid", &st) == 0 ? static_cast<uint64_t>(st.st_ino) : 0;
}

int usable_cpus() {
  cpu_set_t set;
  CPU_ZERO(&set);
  if (sched_getaffinity(0, sizeof(set), &set) != 0) return 1;
  return std::max(1, CPU_COUNT(&set));
}

// A name no other job on this host uses: 64 random bits from rank 0.
absl::StatusOr<std::string> job_token(Store& store, const std::string& key, int rank) {
  if (rank == 0) {
    uint64_t bits = 0;
    if (getrandom(&bits, sizeof(bits), 0) != sizeof(bits)) {
      return absl::UnavailableError(absl::StrCat("getrandom: ", strerror(errno)));
    }
    const std::string token = absl::StrFormat("%016x", bits);
    absl::Status s = store.set(key, Bytes(token.begin(), token.end()));
    if (!s.ok()) return s;
    return token;
  }
  absl::StatusOr<Bytes> value = store.get(key);
  if (!value.ok()) return value.status();
  return std::string(value->begin(), value->end());
}

absl::Status check_header(const SegmentHeader& h, int owner, int size, const Layout& layout,
                          const std::string& name) {
  if (h.magic != kSegmentMagic || h.version != kLayoutVersion ||
      h.rank != static_cast<uint32_t>(owner) || h.world_size != static_cast<uint32_t>(size) ||
      h.num_channels != layout.num_channels || h.num_slots != layout.num_slots ||
      h.slot_bytes != layout.slot_bytes) {
    return absl::FailedPreconditionError(absl::StrCat(
        "shared-memory segment ", name, " of rank ", owner,
        " has another layout (magic, version, rank, world size, channels, slots or slot size "
        "differ: a peer built or configured differently)"));
  }
  return absl::OkStatus();
}

void sweep_once_per_process() {
  static std::once_flag once;
  std::call_once(once, [] { sweep_stale_segments(); });
}

}  // namespace

absl::StatusOr<std::unique_ptr<ShmGroup>> ShmGroup::create(Store& store,
                                                           const std::string& key_prefix,
                                                           int rank, int size,
                                                           const ShmOptions& options,
                                                           const AllAgree& all_agree) {
  if (options.num_channels < 1 || options.num_slots < 1 || options.slot_bytes == 0 ||
      options.slot_bytes % kPage != 0) {
    return absl::InvalidArgumentError(absl::StrCat(
        "shared memory: need num_channels >= 1, num_slots >= 1 and slot_bytes a positive "
        "multiple of ", kPage, "; got ", options.num_channels, ", ", options.num_slots, ", ",
        options.slot_bytes));
  }
  sweep_once_per_process();
  const Layout layout{static_cast<uint32_t>(options.num_channels),
                      static_cast<uint32_t>(options.num_slots), options.slot_bytes};
  std::unique_ptr<ShmGroup> group(new ShmGroup(rank));
  group->segments_.resize(size);

  // Step 1: every rank creates its own segment.
  absl::StatusOr<std::string> token = job_token(store, key_prefix + "shm/token", rank);
  absl::Status created = token.status();
  if (token.ok()) {
    absl::StatusOr<Segment> own = Segment::create(
        absl::StrCat(kSegmentPrefix, *token, ".", rank), layout.total_bytes());
    created = own.status();
    if (own.ok()) {
      auto* h = static_cast<SegmentHeader*>(own->data());
      h->magic = kSegmentMagic;
      h->version = kLayoutVersion;
      h->rank = static_cast<uint32_t>(rank);
      h->world_size = static_cast<uint32_t>(size);
      h->num_channels = layout.num_channels;
      h->num_slots = layout.num_slots;
      h->pid = static_cast<uint32_t>(getpid());
      h->slot_bytes = layout.slot_bytes;
      h->pid_namespace = pid_namespace();
      group->segments_[rank] = std::move(*own);
    }
  }
  if (!all_agree(created.ok())) {
    if (!created.ok()) return created;
    return absl::UnavailableError(
        "shared memory: another rank could not create its segment (its warning says why)");
  }

  // Step 2: every rank maps its peers'; once all have, the names go.
  absl::Status mapped = absl::OkStatus();
  for (int r = 0; r < size && mapped.ok(); ++r) {
    if (r == rank) continue;
    const std::string name = absl::StrCat(kSegmentPrefix, *token, ".", r);
    absl::StatusOr<Segment> peer = Segment::open(name, layout.total_bytes());
    mapped = peer.status();
    if (peer.ok()) {
      mapped = check_header(*static_cast<const SegmentHeader*>(peer->data()), r, size, layout,
                            name);
      group->segments_[r] = std::move(*peer);
    }
  }
  const bool everyone_mapped = all_agree(mapped.ok());
  group->segments_[rank].unlink();
  if (!everyone_mapped) {
    if (!mapped.ok()) return mapped;
    return absl::UnavailableError(
        "shared memory: another rank could not map a peer's segment (its warning says why)");
  }

  const uint64_t own_namespace = pid_namespace();
  group->liveness_.resize(size);
  std::vector<const PeerLiveness*> peers(size, nullptr);
  for (int r = 0; r < size; ++r) {
    if (r == rank) continue;
    const auto* h = static_cast<const SegmentHeader*>(group->segments_[r].data());
    group->liveness_[r] = PeerLiveness(
        h->pid, own_namespace != 0 && h->pid_namespace == own_namespace, &group->segments_[r]);
    peers[r] = &group->liveness_[r];
  }
  const WaitPolicy policy = WaitPolicy::for_load(size, usable_cpus());
  for (uint32_t c = 0; c < layout.num_channels; ++c) {
    std::vector<ChannelControl*> controls(size);
    std::vector<std::vector<uint8_t*>> slots(size);
    for (int r = 0; r < size; ++r) {
      uint8_t* base = static_cast<uint8_t*>(group->segments_[r].data());
      controls[r] = reinterpret_cast<ChannelControl*>(base + layout.control_offset(c));
      for (uint32_t s = 0; s < layout.num_slots; ++s) {
        slots[r].push_back(base + layout.slot_offset(c, s));
      }
    }
    group->channels_.push_back(std::make_unique<Channel>(
        rank, size, std::move(controls), std::move(slots), layout.slot_bytes, peers, policy,
        &group->abort_));
  }
  return group;
}

}  // namespace shm
}  // namespace ddpx
