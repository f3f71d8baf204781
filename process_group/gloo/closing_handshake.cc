#include "process_group/gloo/closing_handshake.h"

#include <condition_variable>
#include <cstdint>
#include <deque>
#include <exception>
#include <mutex>
#include <thread>

#include "gloo/context.h"
#include "gloo/transport/unbound_buffer.h"
#include "gloo/types.h"

#include "process_group/gloo/tcp_pair_access.h"

namespace ddpx {
namespace {

using Clock = std::chrono::steady_clock;

// The slot of the "done" messages; no op of the backend uses this prefix.
constexpr uint8_t kClosingSlotPrefix = 0x41;

// One leaving group. Members are released in reverse order: the buffers
// before the context they use, the connections last.
struct Leaving {
  ~Leaving() {
    // A message still outstanding (the wait stopped at a failed peer or at
    // the limit) is a pair that may yet write into `peers_done` or signal a
    // buffer from the device thread, while the buffers are freed here:
    // close the pairs first and let their handlers return.
    if (context != nullptr && (sends_left > 0 || recvs_left > 0)) {
      tcp_pairs_close_and_settle(*context, "ddpx: leaving the group");
    }
  }
  std::vector<std::shared_ptr<void>> keep_alive;
  std::shared_ptr<gloo::Context> context;
  uint8_t done_byte = 1;
  std::vector<uint8_t> peers_done;  // one byte per rank
  std::unique_ptr<gloo::transport::UnboundBuffer> send_buffer, recv_buffer;
  int sends_left = 0, recvs_left = 0;
  Clock::time_point deadline;
};

// Waits for the outstanding messages until `until`. True when the handshake
// is over (all answered, or a peer failed: nothing more will come).
bool wait_until(Leaving& l, Clock::time_point until) {
  auto wait_one = [&](gloo::transport::UnboundBuffer& b, bool recv, int& left) {
    while (left > 0) {
      const auto remaining =
          std::chrono::duration_cast<std::chrono::milliseconds>(until - Clock::now());
      if (remaining.count() <= 0) return false;
      try {
        const bool completed = recv ? b.waitRecv(remaining) : b.waitSend(remaining);
        if (!completed) break;  // aborted: stop waiting, the rest stays outstanding
        --left;
      } catch (const std::exception&) {
        if (Clock::now() < until) break;  // a peer failed: stop waiting
      }
    }
    return true;
  };
  return wait_one(*l.recv_buffer, true, l.recvs_left) &&
         wait_one(*l.send_buffer, false, l.sends_left);
}

// The background thread that finishes handshakes the destructors left.
// Never destroyed: it may still hold connections when the process exits,
// which closes them anyway.
class Closer {
 public:
  static Closer& instance() {
    static Closer* closer = new Closer();
    return *closer;
  }
  void add(std::unique_ptr<Leaving> l) {
    std::lock_guard<std::mutex> lock(mu_);
    queue_.push_back(std::move(l));
    ready_.notify_one();
  }

 private:
  Closer() { std::thread([this] { loop(); }).detach(); }
  void loop() {
    for (;;) {
      std::unique_ptr<Leaving> l;
      {
        std::unique_lock<std::mutex> lock(mu_);
        ready_.wait(lock, [&] { return !queue_.empty(); });
        l = std::move(queue_.front());
        queue_.pop_front();
      }
      wait_until(*l, l->deadline);
    }
  }
  std::mutex mu_;
  std::condition_variable ready_;
  std::deque<std::unique_ptr<Leaving>> queue_;
};

}  // namespace

void close_after_peers(std::shared_ptr<gloo::Context> context,
                       std::vector<std::shared_ptr<void>> keep_alive,
                       std::chrono::milliseconds grace,
                       std::chrono::milliseconds limit) {
  const int size = context->size;
  if (size <= 1) return;
  auto l = std::make_unique<Leaving>();
  l->keep_alive = std::move(keep_alive);
  l->context = std::move(context);
  l->peers_done.assign(size, 0);
  const auto start = Clock::now();
  l->deadline = start + limit;
  try {
    const uint64_t slot = gloo::Slot::build(kClosingSlotPrefix, 0);
    l->send_buffer = l->context->createUnboundBuffer(&l->done_byte, 1);
    l->recv_buffer = l->context->createUnboundBuffer(l->peers_done.data(), size);
    for (int peer = 0; peer < size; ++peer) {
      if (peer == l->context->rank) continue;
      l->recv_buffer->recv(peer, slot, peer, 1);
      ++l->recvs_left;
      l->send_buffer->send(peer, slot, 0, 1);
      ++l->sends_left;
    }
  } catch (const std::exception&) {
    return;  // the connections are already broken: nothing to protect
  }
  if (wait_until(*l, start + std::min(grace, limit))) return;
  Closer::instance().add(std::move(l));
}

}  // namespace ddpx
