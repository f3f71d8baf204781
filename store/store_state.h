// The TCPStore server's data: the key-value map and the clients waiting on
// keys. No sockets here: the event loop (tcp_store_server.cc) feeds it decoded
// requests and sends what it queues, so this part is testable on its own.
//
// Every request costs time linear in its size. A list request (CHECK, WAIT,
// MULTI_GET, MULTI_SET) runs in slices of at most kSliceEntries entries and
// kSliceBytes bytes, and the event loop serves other clients between
// slices, so one client naming millions of keys does not stall the rest.
#ifndef DDPX_STORE_STORE_STATE_H_
#define DDPX_STORE_STORE_STATE_H_

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/status/status.h"
#include "absl/strings/string_view.h"
#include "store/protocol.h"
#include "store/reply_queue.h"
#include "store/stored_value.h"
#include "store/wait_registry.h"

namespace ddpx {

// A list request part-way through. Offsets count from the frame's first
// byte, so the frame may move in memory between slices.
struct ListWork {
  explicit ListWork(MemoryMeter* meter) : reply(meter) {}
  protocol::QueryType type = protocol::QueryType::kCheck;
  size_t pos = 0;          // the next unread entry
  size_t end = 0;          // the end of the list
  uint64_t left = 0;       // entries not yet applied
  bool all_present = true;  // CHECK
  ReplyQueue reply;        // MULTI_GET: the reply so far, queued once whole
};

class StoreState {
 public:
  // About 1 ms of work on this machine kind (a MULTI_SET entry creating a
  // key costs ~1 us, a CHECK lookup ~0.5 us).
  static constexpr size_t kSliceEntries = 1024;
  static constexpr size_t kSliceBytes = 1 << 20;

  // Pushes STOP_WAITING to a client whose wait is satisfied, at once: it
  // reaches the client before the reply to the request that released it.
  using WakeFn = std::function<void(ClientId)>;

  // output_budget: what one connection may owe (queued reply bytes); a
  // reply that would pass it is refused.
  StoreState(MemoryMeter* meter, uint64_t output_budget, WakeFn wake);

  // Applies `request`, whose strings view into the frame starting at
  // `frame`. The reply, if the query has one, goes to *reply. A list request
  // longer than one slice returns with *work set: call resume() (with the
  // frame's bytes, wherever they are by then) until *work is null.
  //
  // Errors: ResourceExhausted: refused, nothing of the request applied
  // beyond what its message says (memory limit, output budget); the server
  // answers with an error reply and closes the connection. Any other code:
  // the client broke the protocol (bad magic, ADD on a value that is not a
  // number, a second WAIT while one is pending) and is dropped.
  absl::Status apply(ClientId client, const protocol::Request& request,
                     const char* frame, ReplyQueue* reply,
                     std::unique_ptr<ListWork>* work);
  absl::Status resume(ClientId client, const char* frame, ReplyQueue* reply,
                      std::unique_ptr<ListWork>* work);

  // The client went away: forget its pending wait.
  void forget(ClientId client);

  bool is_waiting(ClientId client) const { return waits_.is_waiting(client); }
  size_t num_keys() const { return data_.size(); }
  size_t num_waiting_clients() const { return waits_.num_waiting_clients(); }

 private:

  // Writes `value` under `key`. An overwrite reuses the old value's storage
  // when no reply holds it and it is small, so no allocation happens then.
  absl::Status store(absl::string_view key, absl::string_view value);
  absl::Status add(absl::string_view key, int64_t delta, int64_t* result);
  absl::Status append(absl::string_view key, absl::string_view value);
  absl::Status compare_set(const protocol::Request& r, ReplyQueue* reply);
  // A reply of reply_size bytes to a connection already owing `owed`.
  absl::Status check_budget(uint64_t reply_size, uint64_t owed) const;
  // Queues a value (empty if null) onto *reply, which already holds
  // reply_so_far bytes of this reply, for a connection owing `owed`.
  absl::Status reply_value(const ValueRef* value, ReplyQueue* reply,
                           uint64_t reply_so_far, uint64_t owed);
  absl::Status step(ClientId client, const char* frame, ReplyQueue* reply,
                    ListWork* work);
  absl::Status refuse_write(absl::string_view what, absl::string_view key,
                            uint64_t bytes) const;

  MemoryMeter* meter_;
  const uint64_t output_budget_;
  WakeFn wake_;
  absl::flat_hash_map<std::string, ValueRef> data_;
  WaitRegistry waits_;
};

// Reads a leading integer as torch's servers do (std::stoll): optional
// white space, an optional sign, decimal digits; what follows is ignored
// ("12abc" is 12). False when there are no digits or the number does not
// fit in int64.
bool parse_leading_integer(absl::string_view text, int64_t* value);

}  // namespace ddpx

#endif  // DDPX_STORE_STORE_STATE_H_
