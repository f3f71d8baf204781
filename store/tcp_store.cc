#include "store/tcp_store.h"

#include <algorithm>
#include <thread>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "store/protocol.h"
#include "store/socket_util.h"

namespace ddpx {

using protocol::FrameWriter;
using protocol::QueryType;

namespace {

// torch's client puts "/" before every user key, and counts workers in on
// the unprefixed "init/".
constexpr char kKeyPrefix[] = "/";
constexpr char kInitKey[] = "init/";

std::string wire(const std::string& key) { return kKeyPrefix + key; }

Bytes as_bytes(const std::string& s) { return Bytes(s.begin(), s.end()); }

absl::Status annotate(const absl::Status& s, const std::string& what) {
  return absl::Status(s.code(), absl::StrCat(what, ": ", s.message()));
}

// torch's libuv server closes the connection on a key over 8 KiB; say so
// when that may be why.
absl::Status with_long_key_hint(const absl::Status& s, const std::string& key) {
  constexpr size_t kTorchLibuvMaxKey = 8 << 10;
  if (!absl::IsUnavailable(s) || wire(key).size() <= kTorchLibuvMaxKey) return s;
  return absl::Status(s.code(), absl::StrCat(s.message(), " (the key is ", wire(key).size(),
                                             " bytes on the wire; torch's libuv server "
                                             "closes the connection on keys over ",
                                             kTorchLibuvMaxKey, " bytes)"));
}

}  // namespace

absl::StatusOr<std::unique_ptr<TCPStore>> TCPStore::create(
    std::string host, const TCPStoreOptions& options) {
  std::unique_ptr<TCPStore> store(new TCPStore(host, options.port, options.timeout));
  store->num_workers_ = options.num_workers;
  if (options.is_master) {
    TCPStoreServerOptions server_options = options.server;
    server_options.port = options.port;
    // Clients reaching the master through loopback are on this machine:
    // nobody elsewhere needs (or should get) a way in.
    if (server_options.host.empty()) server_options.host = loopback_listen_host(host);
    absl::StatusOr<std::unique_ptr<TCPStoreServer>> server =
        TCPStoreServer::start(server_options);
    if (!server.ok()) return server.status();
    store->server_ = std::move(*server);
    store->port_ = store->server_->port();
  }
  absl::StatusOr<std::unique_ptr<StoreConnection>> conn =
      StoreConnection::connect(store->host_, store->port_, options.timeout);
  if (!conn.ok()) return conn.status();
  store->conn_ = std::move(*conn);
  if (options.wait_for_workers && options.num_workers.has_value()) {
    absl::Status s = store->wait_for_workers();
    if (!s.ok()) return s;
  }
  return store;
}

TCPStore::~TCPStore() = default;

TCPStore::Deadline TCPStore::deadline_after(std::chrono::milliseconds timeout) const {
  return StoreConnection::Clock::now() + timeout;
}

TCPStore::Deadline TCPStore::reply_deadline(std::chrono::milliseconds timeout) const {
  return StoreConnection::Clock::now() +
         std::max<std::chrono::milliseconds>(timeout, kReplyTimeoutFloor);
}

absl::Status TCPStore::usable_locked() const {
  if (!broken_.ok()) {
    return absl::Status(broken_.code(),
                        absl::StrCat("store: connection unusable after an earlier "
                                     "failure: ", broken_.message()));
  }
  return absl::OkStatus();
}

absl::Status TCPStore::broken_locked(absl::Status why) {
  // After a failed exchange the byte stream may be out of step; never read a
  // stale reply as the answer to a later request.
  if (broken_.ok()) broken_ = why;
  return why;
}

absl::Status TCPStore::send_locked(const std::string& frame, Deadline deadline) {
  absl::Status s = usable_locked();
  if (!s.ok()) return s;
  s = conn_->send(frame, deadline);
  if (!s.ok()) return broken_locked(s);
  return absl::OkStatus();
}

absl::Status TCPStore::send_acknowledged_locked(std::string* frame, Deadline deadline) {
  // SET, APPEND and MULTI_SET have no reply in the protocol. A PING behind
  // them makes the call return only once the server has applied the write,
  // so a value set before telling another process is there when it looks.
  // 0xFFFFFFFF would read as the start of an error reply.
  if (++ping_nonce_ == 0xffffffffu) ping_nonce_ = 1;
  const uint32_t nonce = ping_nonce_;
  FrameWriter(frame).query(QueryType::kPing).u32(nonce);
  absl::Status s = send_locked(*frame, deadline);
  if (!s.ok()) return s;
  absl::StatusOr<uint32_t> echo = conn_->recv_echo(deadline);
  if (!echo.ok()) return broken_locked(echo.status());
  if (*echo != nonce) {
    return broken_locked(absl::DataLossError("store: PING echo out of step"));
  }
  return absl::OkStatus();
}

absl::Status TCPStore::set(const std::string& key, const Bytes& value) {
  std::lock_guard<std::mutex> lock(mu_);
  std::string frame;
  FrameWriter(&frame).query(QueryType::kSet).bytes(wire(key)).bytes(value);
  absl::Status s = send_acknowledged_locked(&frame, reply_deadline(timeout()));
  if (!s.ok()) return annotate(with_long_key_hint(s, key), absl::StrCat("store: set('", key, "')"));
  return s;
}

absl::StatusOr<Bytes> TCPStore::get(const std::string& key,
                                    std::chrono::milliseconds timeout) {
  std::lock_guard<std::mutex> lock(mu_);
  absl::Status s = wait_locked({wire(key)}, {key}, timeout);
  if (!s.ok()) return s;
  std::string frame;
  FrameWriter(&frame).query(QueryType::kGet).bytes(wire(key));
  // The key exists now: the value comes however late the server is (torch's
  // client waits for it without a limit; an empty value from torch's
  // classic server can take 200 ms).
  Deadline deadline = reply_deadline(timeout);
  s = send_locked(frame, deadline);
  if (!s.ok()) return annotate(s, absl::StrCat("store: get('", key, "')"));
  absl::StatusOr<std::string> value = conn_->recv_bytes(deadline);
  if (!value.ok()) {
    return annotate(broken_locked(value.status()), absl::StrCat("store: get('", key, "')"));
  }
  return as_bytes(*value);
}

absl::StatusOr<int64_t> TCPStore::add_locked(const std::string& wire_key, int64_t delta,
                                             Deadline deadline) {
  std::string frame;
  FrameWriter(&frame).query(QueryType::kAdd).bytes(wire_key).i64(delta);
  absl::Status s = send_locked(frame, deadline);
  if (!s.ok()) return s;
  absl::StatusOr<int64_t> value = conn_->recv_i64(deadline);
  if (!value.ok()) {
    if (!absl::IsUnavailable(value.status())) return broken_locked(value.status());
    // Servers (ours and torch's) close the connection on an ADD to a value
    // that does not start with an integer, and ours on an ADD past its
    // memory limit (an int64 reply has no room for an error reply).
    return broken_locked(absl::Status(
        value.status().code(),
        absl::StrCat(value.status().message(),
                     " (a server closes the connection on ADD to a value that "
                     "does not start with an integer, and ours on ADD past its "
                     "memory limit; its log says which)")));
  }
  return value;
}

absl::StatusOr<int64_t> TCPStore::add(const std::string& key, int64_t delta) {
  std::lock_guard<std::mutex> lock(mu_);
  absl::StatusOr<int64_t> v = add_locked(wire(key), delta, reply_deadline(timeout()));
  if (!v.ok()) return annotate(v.status(), absl::StrCat("store: add('", key, "')"));
  return v;
}

absl::StatusOr<Bytes> TCPStore::compare_set(const std::string& key, const Bytes& expected,
                                            const Bytes& desired) {
  std::lock_guard<std::mutex> lock(mu_);
  std::string frame;
  FrameWriter(&frame)
      .query(QueryType::kCompareSet)
      .bytes(wire(key))
      .bytes(expected)
      .bytes(desired);
  Deadline deadline = reply_deadline(timeout());
  absl::Status s = send_locked(frame, deadline);
  absl::StatusOr<std::string> value = s.ok() ? conn_->recv_bytes(deadline)
                                             : absl::StatusOr<std::string>(s);
  if (!value.ok()) {
    return annotate(broken_locked(value.status()),
                    absl::StrCat("store: compare_set('", key, "')"));
  }
  return as_bytes(*value);
}

absl::Status TCPStore::wait(const std::vector<std::string>& keys,
                            std::chrono::milliseconds timeout) {
  std::lock_guard<std::mutex> lock(mu_);
  std::vector<std::string> wire_keys;
  wire_keys.reserve(keys.size());
  for (const auto& k : keys) wire_keys.push_back(wire(k));
  return wait_locked(wire_keys, keys, timeout);
}

absl::Status TCPStore::wait_locked(const std::vector<std::string>& wire_keys,
                                   const std::vector<std::string>& user_keys,
                                   std::chrono::milliseconds timeout) {
  std::string frame;
  FrameWriter w(&frame);
  w.query(QueryType::kWait).u64(wire_keys.size());
  for (const auto& k : wire_keys) w.bytes(k);
  const std::string waiting_for =
      absl::StrCat("waiting for keys [", absl::StrJoin(user_keys, ", "), "]");
  absl::Status s = send_locked(frame, deadline_after(timeout));
  if (!s.ok()) return annotate(s, absl::StrCat("store: ", waiting_for));
  absl::StatusOr<uint8_t> reply = conn_->recv_u8(deadline_after(timeout));
  if (reply.ok()) {
    if (*reply != static_cast<uint8_t>(protocol::WaitResponse::kStopWaiting)) {
      return broken_locked(absl::DataLossError(
          absl::StrCat("store: unexpected reply ", int{*reply}, " to WAIT")));
    }
    return absl::OkStatus();
  }
  if (!absl::IsDeadlineExceeded(reply.status())) {
    // The server went away (or the link broke) while we waited.
    return annotate(broken_locked(reply.status()),
                    absl::StrCat("store: failed while ", waiting_for));
  }
  // Timed out: cancel, then learn which keys are still missing. The server
  // may have released us just before it saw the cancel; both bytes come.
  Deadline grace = deadline_after(std::min(timeout, std::chrono::milliseconds(5000)) +
                                  std::chrono::milliseconds(1000));
  std::string cancel;
  FrameWriter(&cancel).query(QueryType::kCancelWait);
  s = send_locked(cancel, grace);
  absl::StatusOr<uint8_t> first = s.ok() ? conn_->recv_u8(grace) : absl::StatusOr<uint8_t>(s);
  bool released = first.ok() &&
                  *first == static_cast<uint8_t>(protocol::WaitResponse::kStopWaiting);
  if (released) first = conn_->recv_u8(grace);
  if (!first.ok() ||
      *first != static_cast<uint8_t>(protocol::WaitResponse::kWaitCanceled)) {
    (void)broken_locked(first.ok() ? absl::DataLossError("store: bad reply to CANCEL_WAIT")
                             : first.status());
    return wait_timeout_error(user_keys, timeout);
  }
  if (released) return absl::OkStatus();
  std::vector<std::string> missing;
  constexpr size_t kMaxKeysToCheck = 64;
  for (size_t i = 0; i < wire_keys.size(); ++i) {
    if (wire_keys.size() == 1 || i >= kMaxKeysToCheck) {
      missing.push_back(user_keys[i]);
      continue;
    }
    std::string check;
    FrameWriter(&check).query(QueryType::kCheck).u64(1).bytes(wire_keys[i]);
    absl::Status cs = send_locked(check, grace);
    absl::StatusOr<uint8_t> ready = cs.ok() ? conn_->recv_u8(grace)
                                            : absl::StatusOr<uint8_t>(cs);
    if (!ready.ok()) {
      (void)broken_locked(ready.status());
      return wait_timeout_error(user_keys, timeout);
    }
    if (*ready != static_cast<uint8_t>(protocol::CheckResponse::kReady)) {
      missing.push_back(user_keys[i]);
    }
  }
  if (missing.empty()) missing = user_keys;  // they appeared meanwhile
  return wait_timeout_error(missing, timeout);
}

absl::StatusOr<bool> TCPStore::check(const std::vector<std::string>& keys) {
  std::lock_guard<std::mutex> lock(mu_);
  std::string frame;
  FrameWriter w(&frame);
  w.query(QueryType::kCheck).u64(keys.size());
  for (const auto& k : keys) w.bytes(wire(k));
  Deadline deadline = reply_deadline(timeout());
  absl::Status s = send_locked(frame, deadline);
  absl::StatusOr<uint8_t> r = s.ok() ? conn_->recv_u8(deadline) : absl::StatusOr<uint8_t>(s);
  if (!r.ok()) return annotate(broken_locked(r.status()), "store: check");
  return *r == static_cast<uint8_t>(protocol::CheckResponse::kReady);
}

absl::StatusOr<bool> TCPStore::delete_key(const std::string& key) {
  std::lock_guard<std::mutex> lock(mu_);
  std::string frame;
  FrameWriter(&frame).query(QueryType::kDeleteKey).bytes(wire(key));
  Deadline deadline = reply_deadline(timeout());
  absl::Status s = send_locked(frame, deadline);
  absl::StatusOr<int64_t> n = s.ok() ? conn_->recv_i64(deadline) : absl::StatusOr<int64_t>(s);
  if (!n.ok()) {
    return annotate(broken_locked(n.status()), absl::StrCat("store: delete_key('", key, "')"));
  }
  return *n == 1;
}

absl::StatusOr<int64_t> TCPStore::num_keys() {
  std::lock_guard<std::mutex> lock(mu_);
  std::string frame;
  FrameWriter(&frame).query(QueryType::kGetNumKeys);
  Deadline deadline = reply_deadline(timeout());
  absl::Status s = send_locked(frame, deadline);
  absl::StatusOr<int64_t> n = s.ok() ? conn_->recv_i64(deadline) : absl::StatusOr<int64_t>(s);
  if (!n.ok()) return annotate(broken_locked(n.status()), "store: num_keys");
  return n;
}

absl::StatusOr<std::vector<Bytes>> TCPStore::multi_get(const std::vector<std::string>& keys,
                                                       std::chrono::milliseconds timeout) {
  std::lock_guard<std::mutex> lock(mu_);
  std::vector<std::string> wire_keys;
  for (const auto& k : keys) wire_keys.push_back(wire(k));
  absl::Status s = wait_locked(wire_keys, keys, timeout);
  if (!s.ok()) return s;
  std::string frame;
  FrameWriter w(&frame);
  w.query(QueryType::kMultiGet).u64(keys.size());
  for (const auto& k : wire_keys) w.bytes(k);
  Deadline deadline = reply_deadline(timeout);
  s = send_locked(frame, deadline);
  if (!s.ok()) return annotate(s, "store: multi_get");
  std::vector<Bytes> values;
  values.reserve(keys.size());
  for (size_t i = 0; i < keys.size(); ++i) {
    absl::StatusOr<std::string> v = conn_->recv_bytes(deadline);
    if (!v.ok()) return annotate(broken_locked(v.status()), "store: multi_get");
    values.push_back(as_bytes(*v));
  }
  return values;
}

absl::Status TCPStore::multi_set(const std::vector<std::string>& keys,
                                 const std::vector<Bytes>& values) {
  if (keys.size() != values.size()) {
    return absl::InvalidArgumentError(absl::StrCat(
        "store: multi_set got ", keys.size(), " keys but ", values.size(), " values"));
  }
  std::lock_guard<std::mutex> lock(mu_);
  std::string frame;
  FrameWriter w(&frame);
  w.query(QueryType::kMultiSet).u64(keys.size());
  for (size_t i = 0; i < keys.size(); ++i) w.bytes(wire(keys[i])).bytes(values[i]);
  absl::Status s = send_acknowledged_locked(&frame, reply_deadline(timeout()));
  if (!s.ok()) return annotate(s, "store: multi_set");
  return s;
}

absl::Status TCPStore::append(const std::string& key, const Bytes& value) {
  std::lock_guard<std::mutex> lock(mu_);
  std::string frame;
  FrameWriter(&frame).query(QueryType::kAppend).bytes(wire(key)).bytes(value);
  absl::Status s = send_acknowledged_locked(&frame, reply_deadline(timeout()));
  if (!s.ok()) {
    return annotate(with_long_key_hint(s, key), absl::StrCat("store: append('", key, "')"));
  }
  return s;
}

absl::StatusOr<std::unique_ptr<Store>> TCPStore::clone() {
  TCPStoreOptions options;
  options.port = port_;
  options.timeout = timeout();
  options.wait_for_workers = false;
  absl::StatusOr<std::unique_ptr<TCPStore>> copy = TCPStore::create(host_, options);
  if (!copy.ok()) return copy.status();
  (*copy)->num_workers_ = num_workers_;
  return std::unique_ptr<Store>(std::move(*copy));
}

absl::Status TCPStore::wait_for_workers() {
  if (!num_workers_.has_value()) return absl::OkStatus();
  std::lock_guard<std::mutex> lock(mu_);
  const Deadline deadline = deadline_after(timeout());
  absl::StatusOr<int64_t> joined = add_locked(kInitKey, 1, deadline);
  if (!joined.ok()) return annotate(joined.status(), "store: wait_for_workers");
  if (!server_) return absl::OkStatus();
  // The master keeps the job's server alive until everyone has connected.
  // Only this one client re-reads the counter (ADD 0), with a short sleep;
  // the server itself never polls.
  auto pause = std::chrono::milliseconds(1);
  while (*joined < *num_workers_) {
    if (StoreConnection::Clock::now() >= deadline) {
      return absl::DeadlineExceededError(absl::StrCat(
          "store: timed out after ", timeout().count(), " ms waiting for workers: ",
          *joined, "/", *num_workers_, " joined"));
    }
    std::this_thread::sleep_for(pause);
    pause = std::min(pause * 2, std::chrono::milliseconds(10));
    joined = add_locked(kInitKey, 0, deadline_after(timeout()));
    if (!joined.ok()) return annotate(joined.status(), "store: wait_for_workers");
  }
  return absl::OkStatus();
}

}  // namespace ddpx
