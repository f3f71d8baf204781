// The clients waiting for keys to appear (the server side of WAIT).
//
// A WAIT may name millions of keys, so a registration costs little beyond
// its key's bytes: each wait keeps the keys it registered on packed in one
// string (a 4-byte length, then the bytes), and an ordered set of 8-byte
// registrations (the wait's slot, the key's offset in its string) finds the
// waits on a key when it appears. No per-key heap object, no per-key copy
// beyond the packed one. Everything is counted in the server's MemoryMeter
// and returned when the wait ends, is cancelled or its client leaves.
//
// Counted per registration, as torch's servers count: a key missing when
// the WAIT named it counts once it is created, even if deleted afterwards.
// A key named twice is registered twice (and counted off twice), except
// when named again right after itself.
#ifndef DDPX_STORE_WAIT_REGISTRY_H_
#define DDPX_STORE_WAIT_REGISTRY_H_

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "absl/container/btree_set.h"
#include "absl/container/flat_hash_map.h"
#include "absl/status/status.h"
#include "absl/strings/string_view.h"
#include "store/stored_value.h"

namespace ddpx {

// Identifies one connection for its whole life (never reused).
using ClientId = uint64_t;

class WaitRegistry {
 public:
  // Counted in the meter per registration besides its packed key (its share
  // of the ordered set's nodes), and per wait.
  static constexpr uint64_t kRegistrationBytes = 24;
  static constexpr uint64_t kWaitBytes = 256;

  explicit WaitRegistry(MemoryMeter* meter);
  WaitRegistry(const WaitRegistry&) = delete;
  WaitRegistry& operator=(const WaitRegistry&) = delete;

  // Starts registering a WAIT of `client` (which has none pending).
  void begin(ClientId client);
  // Registers the pending wait of `client` on the missing `key`.
  // `list_bytes_left`: the bytes of the WAIT's list from this key on (an
  // upper bound of what its packed keys need, reserved once). Refused
  // (ResourceExhausted) past the memory limit; the caller cancels.
  absl::Status add(ClientId client, absl::string_view key, uint64_t list_bytes_left);
  // Every key of the WAIT was looked at. True when none was missing (or all
  // appeared meanwhile): the wait has ended, with no wake-up.
  bool finish_registering(ClientId client);
  // `key` was created: counts it off every wait registered on it, and
  // calls wake(client) for each wait that has nothing missing any more.
  void key_created(absl::string_view key, const std::function<void(ClientId)>& wake);
  // Forgets the wait of `client`, if any (CANCEL_WAIT, refusal, hang-up).
  void cancel(ClientId client);

  bool is_waiting(ClientId client) const { return by_client_.count(client) > 0; }
  size_t num_waiting_clients() const { return by_client_.size(); }
  size_t num_registrations() const { return registrations_.size(); }

 private:
  static constexpr uint32_t kNone = UINT32_MAX;

  struct Wait {
    ClientId client = 0;
    uint64_t missing = 0;     // its registrations not yet counted off
    bool registering = true;  // slices of its WAIT still to come
    std::string keys;         // the keys it registered on, packed
    uint32_t last = kNone;    // offset of its latest registration
    uint64_t counted = 0;     // bytes counted in the meter for it
  };
  // (slot of the wait) << 32 | (offset of the key in its `keys`).
  using Registration = uint64_t;

  // Orders registrations by key, then by value, so each is unique and those
  // of one key are adjacent; compares a registration with a key directly.
  struct ByKey {
    using is_transparent = void;
    const WaitRegistry* registry;
    bool operator()(Registration a, Registration b) const;
    bool operator()(Registration a, absl::string_view b) const;
    bool operator()(absl::string_view a, Registration b) const;
  };

  absl::string_view key_of(Registration r) const;
  Wait* find(ClientId client);
  void recount(Wait* w);
  void end(uint32_t slot);
  // Takes every registration of `slot` out of the set.
  void unregister(uint32_t slot);

  MemoryMeter* meter_;
  std::vector<std::unique_ptr<Wait>> slots_;
  std::vector<uint32_t> free_slots_;
  absl::flat_hash_map<ClientId, uint32_t> by_client_;
  absl::btree_set<Registration, ByKey> registrations_;
};

}  // namespace ddpx

#endif  // DDPX_STORE_WAIT_REGISTRY_H_
