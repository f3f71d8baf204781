// The TCPStore server's data: the key-value map and the clients waiting on
// keys. No sockets here: the event loop (tcp_store_server.cc) feeds it decoded
// requests and sends what it answers, so this part is testable on its own.
#ifndef DDPX_STORE_STORE_STATE_H_
#define DDPX_STORE_STORE_STATE_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/status/status.h"
#include "absl/strings/string_view.h"
#include "store/protocol.h"

namespace ddpx {

// Identifies one connection for its whole life (never reused).
using ClientId = uint64_t;

class StoreState {
 public:
  // Applies `request` from `client`. Appends the response bytes, if the query
  // has one, to *reply, and the clients whose WAIT is now satisfied to
  // *woken (each is owed one STOP_WAITING byte). An error means the client
  // broke the protocol (bad magic, ADD on a non-number, a second WAIT while
  // one is pending) and must be dropped; the state is unchanged then.
  absl::Status apply(ClientId client, const protocol::Request& request,
                     std::string* reply, std::vector<ClientId>* woken);

  // The client went away: forget its pending wait.
  void forget(ClientId client);

  bool is_waiting(ClientId client) const { return waits_.count(client) > 0; }
  size_t num_keys() const { return data_.size(); }
  size_t num_waiting_clients() const { return waits_.size(); }

 private:
  struct PendingWait {
    size_t missing = 0;
    std::vector<std::string> keys;  // the keys it is still registered on
  };

  // Sets `key`, reusing the storage of the (small) value it replaces: no
  // allocation when a key is overwritten with a value no longer than before.
  void store(const std::string& key, absl::string_view value,
             std::vector<ClientId>* woken);
  // A key appeared: count it off every wait registered on it.
  void key_created(const std::string& key, std::vector<ClientId>* woken);
  void start_wait(ClientId client, const std::vector<std::string>& keys,
                  std::string* reply);
  void cancel_wait(ClientId client);

  // Open addressing: a lookup is one probe sequence in one array, and
  // string_view keys are looked up without building a std::string.
  absl::flat_hash_map<std::string, std::string> data_;
  absl::flat_hash_map<std::string, std::vector<ClientId>> waiters_;
  absl::flat_hash_map<ClientId, PendingWait> waits_;
};

}  // namespace ddpx

#endif  // DDPX_STORE_STORE_STATE_H_
