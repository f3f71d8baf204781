// TCPStore: the Store clients use across processes and machines, speaking
// PyTorch's TCPStore protocol to a TCPStoreServer (ours or torch's).
//
//   TCPStoreOptions opts;
//   opts.port = 29500;
//   opts.is_master = (rank == 0);   // rank 0 also runs the server in-process
//   opts.num_workers = world_size;  // wait until every rank has connected
//   auto store = TCPStore::create("127.0.0.1", opts);
//   (*store)->set("addr/0", "10.0.0.1:4000");
//
// set/append/multi_set return once the server has applied them (a PING
// follows each), so other processes see the write as soon as it returns.
//
// Keys travel with a "/" in front, as torch's client sends them, so torch
// and ddpx clients see each other's keys.
#ifndef DDPX_STORE_TCP_STORE_H_
#define DDPX_STORE_TCP_STORE_H_

#include <memory>
#include <mutex>
#include <optional>
#include <string>

#include "store/store.h"
#include "store/store_connection.h"
#include "store/tcp_store_server.h"

namespace ddpx {

struct TCPStoreOptions {
  static constexpr uint16_t kDefaultPort = 29500;

  uint16_t port = kDefaultPort;
  // Start a server in this process (port 0 picks a free one; see port()).
  bool is_master = false;
  // With a value, every client counts itself in on the "init/" key and the
  // master's create() waits until this many have (torch's world_size).
  std::optional<int> num_workers;
  bool wait_for_workers = true;
  // Default timeout of every operation, of connecting and of
  // wait_for_workers.
  std::chrono::milliseconds timeout = Store::kDefaultTimeout;
  // Used for the in-process server when is_master (its port is overridden
  // by the above). An empty server.host listens on loopback only when the
  // host given to create() is a loopback address or "localhost" (its clients
  // are all on this machine), else on every interface. server.max_memory
  // defaults to TCPStoreServerOptions::kDefaultMaxMemory (1 GiB), so what
  // any client can make this process hold is bounded; 0 lifts the limit.
  TCPStoreServerOptions server;
};

class TCPStore : public Store {
 public:
  // The timeout of a call bounds its wait for keys. A reply to a request
  // that waits for nothing (a GET once its key exists, ADD, a SET's
  // acknowledgement) is awaited at least this long: torch's client waits
  // for those without a limit, and torch's servers can be slow to send
  // them, so a short timeout must not fail an exchange that is under way.
  static constexpr std::chrono::seconds kReplyTimeoutFloor{30};

  static absl::StatusOr<std::unique_ptr<TCPStore>> create(
      std::string host, const TCPStoreOptions& options = {});
  ~TCPStore() override;

  absl::Status set(const std::string& key, const Bytes& value) override;
  absl::StatusOr<Bytes> get(const std::string& key,
                            std::chrono::milliseconds timeout) override;
  using Store::get;
  absl::StatusOr<int64_t> add(const std::string& key, int64_t delta) override;
  absl::StatusOr<Bytes> compare_set(const std::string& key, const Bytes& expected,
                                    const Bytes& desired) override;
  absl::Status wait(const std::vector<std::string>& keys,
                    std::chrono::milliseconds timeout) override;
  using Store::wait;
  absl::StatusOr<bool> check(const std::vector<std::string>& keys) override;
  absl::StatusOr<bool> delete_key(const std::string& key) override;
  absl::StatusOr<int64_t> num_keys() override;
  absl::StatusOr<std::vector<Bytes>> multi_get(
      const std::vector<std::string>& keys,
      std::chrono::milliseconds timeout) override;
  using Store::multi_get;
  absl::Status multi_set(const std::vector<std::string>& keys,
                         const std::vector<Bytes>& values) override;
  absl::Status append(const std::string& key, const Bytes& value) override;
  // A new connection to the same server (not a master, no worker count-in).
  absl::StatusOr<std::unique_ptr<Store>> clone() override;
  using Store::set;

  // Counts this client in on "init/"; the master then waits (up to the
  // timeout) until num_workers clients have. create() calls it when
  // wait_for_workers is set.
  absl::Status wait_for_workers();
  std::optional<int> num_workers() const { return num_workers_; }

  const std::string& host() const { return host_; }
  uint16_t port() const { return port_; }
  // The in-process server, when is_master; else null.
  TCPStoreServer* server() const { return server_.get(); }

 private:
  TCPStore(std::string host, uint16_t port, std::chrono::milliseconds timeout)
      : Store(timeout), host_(std::move(host)), port_(port) {}

  using Deadline = StoreConnection::Clock::time_point;
  Deadline deadline_after(std::chrono::milliseconds timeout) const;
  // For a reply that waits for nothing: max(timeout, kReplyTimeoutFloor).
  Deadline reply_deadline(std::chrono::milliseconds timeout) const;
  // Sends one request; marks the connection broken on failure.
  absl::Status send_locked(const std::string& frame, Deadline deadline);
  // Sends a write that has no reply, followed by a PING, and waits for the
  // echo: the write is applied when this returns.
  absl::Status send_acknowledged_locked(std::string* frame, Deadline deadline);
  absl::Status usable_locked() const;
  absl::Status broken_locked(absl::Status why);
  absl::Status wait_locked(const std::vector<std::string>& wire_keys,
                           const std::vector<std::string>& user_keys,
                           std::chrono::milliseconds timeout);
  absl::StatusOr<int64_t> add_locked(const std::string& wire_key, int64_t delta,
                                     Deadline deadline);

  std::string host_;
  uint16_t port_;
  std::optional<int> num_workers_;
  std::unique_ptr<TCPStoreServer> server_;
  std::mutex mu_;  // one request/response exchange at a time
  std::unique_ptr<StoreConnection> conn_;
  absl::Status broken_;  // set once the stream can no longer be trusted
  uint32_t ping_nonce_ = 0;
};

}  // namespace ddpx

#endif  // DDPX_STORE_TCP_STORE_H_
