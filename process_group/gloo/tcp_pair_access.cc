#include "process_group/gloo/tcp_pair_access.h"

#include <sys/socket.h>
#include <sys/time.h>

#include <atomic>
#include <cctype>
#include <cerrno>
#include <cstddef>
#include <cstring>
#include <string>
#include <type_traits>

#include "absl/strings/str_cat.h"
#include "gloo/config.h"
#include "gloo/context.h"
#include "gloo/transport/tcp/pair.h"

namespace ddpx {
namespace {

using TcpPair = gloo::transport::tcp::Pair;

// If one of these fails, the libgloo being built against is not the one
// this file was written for. Read its gloo/transport/tcp/pair.h and
// gloo/transport/tcp/pair.cc, check that the four fields below still mean
// what the comments in tcp_pair_access.h say (and that Gloo still takes
// `m_` around them), update the accessors and then the expected values here.
// missing_gloo_headers/gloo/common/memory.h stands in for a header Debian
// does not ship; it is only right if the new Gloo's NonOwningPtr and
// WeakNonOwningPtr still hold one shared_ptr / weak_ptr each.
static_assert(GLOO_VERSION == 500,
              "libgloo is not 0.5.0: check process_group/gloo/tcp_pair_access.cc against "
              "the new gloo/transport/tcp/pair.h (see the comment above this line)");
// The size of tcp::Pair as declared by libgloo 0.5's headers (with the
// memory.h stand-in): a member added, removed or resized changes it.
static_assert(sizeof(TcpPair) == 896,
              "gloo::transport::tcp::Pair changed size: its members are not libgloo 0.5's. "
              "Check the fields process_group/gloo/tcp_pair_access.cc reads");

// A pointer to a protected member formed inside a derived class may be used
// on any object of the base: the standard way in. Never instantiated.
struct Internals : TcpPair {
  static std::mutex& mutex(TcpPair& pair) { return pair.*(&Internals::m_); }
  static size_t& send_buffer_size(TcpPair& pair) { return pair.*(&Internals::sendBufferSize_); }
  static int fd(TcpPair& pair) { return pair.*(&Internals::fd_); }
  static bool is_sync(TcpPair& pair) { return (pair.*(&Internals::sync_)).load(); }
  // Unbound-buffer receives posted and not yet answered with data, and
  // sends waiting for the peer's receive (under mutex()). These lie after
  // `rx_`: their offsets rely on the memory.h stand-in (sizeof(TcpPair)
  // above, and tcp_pair_access_test / flight_recorder tests on live pairs).
  static bool has_pending_recv(TcpPair& pair) {
    for (const auto& entry : pair.*(&Internals::localPendingRecv_)) {
      if (!entry.second.empty()) return true;
    }
    return false;
  }
  static bool has_pending_send(TcpPair& pair) {
    for (const auto& entry : pair.*(&Internals::localPendingSend_)) {
      if (!entry.second.empty()) return true;
    }
    return false;
  }
  // Fails the pair's pending ops with `reason` and closes it (unless a
  // failure already did): what tcp::Context does to every pair when an op
  // times out. Takes the pair's lock itself.
  static void fail_and_close(TcpPair& pair, const std::string& reason) {
    (pair.*(&Internals::signalExceptionExternal))(reason);
  }
  // The peer's address as Gloo's messages print it.
  static std::string peer_address(TcpPair& pair) {
    return (pair.*(&Internals::peer_)).str();
  }

  // What the accessors assume of each field's type ("no member named ..."
  // here means Gloo renamed or removed one: see the comment at the top).
  static_assert(std::is_same<decltype(m_), std::mutex>::value,
                "tcp::Pair::m_ is no longer a std::mutex (tcp_pair_access.cc)");
  static_assert(std::is_same<decltype(sendBufferSize_), size_t>::value,
                "tcp::Pair::sendBufferSize_ is no longer a size_t (tcp_pair_access.cc)");
  static_assert(std::is_same<decltype(fd_), int>::value,
                "tcp::Pair::fd_ is no longer an int (tcp_pair_access.cc)");
  static_assert(std::is_same<decltype(sync_), std::atomic<bool>>::value,
                "tcp::Pair::sync_ is no longer a std::atomic<bool> (tcp_pair_access.cc)");

  // Every field touched lies before `rx_`, the first member whose layout
  // depends on the memory.h stand-in (an Op holds a WeakNonOwningPtr): were
  // the stand-in wrong, the fields read here would still be where Gloo's
  // own code puts them.
  static constexpr bool before_stand_in_types() {
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Winvalid-offsetof"
    return offsetof(Internals, m_) < offsetof(Internals, rx_) &&
           offsetof(Internals, sendBufferSize_) < offsetof(Internals, rx_) &&
           offsetof(Internals, fd_) < offsetof(Internals, rx_) &&
           offsetof(Internals, sync_) < offsetof(Internals, rx_);
#pragma GCC diagnostic pop
  }
};

static_assert(Internals::before_stand_in_types(),
              "a field tcp_pair_access.cc reads now lies after tcp::Pair::rx_, whose layout "
              "depends on missing_gloo_headers/gloo/common/memory.h: check that stand-in "
              "against the new Gloo");

TcpPair* tcp_pair(gloo::Context& context, int peer) {
  if (peer == context.rank || peer < 0 || peer >= context.size) return nullptr;
  auto& pair = context.getPair(peer);
  return pair == nullptr ? nullptr : dynamic_cast<TcpPair*>(pair.get());
}

// Whether `text` holds `address` as a whole ("[10.0.0.1]:4567" is not in
// "[10.0.0.1]:45678").
bool names(const std::string& text, const std::string& address) {
  if (address.empty()) return false;
  for (size_t at = text.find(address); at != std::string::npos;
       at = text.find(address, at + 1)) {
    const size_t end = at + address.size();
    if (end == text.size() || !isdigit(static_cast<unsigned char>(text[end]))) return true;
  }
  return false;
}

}  // namespace

bool is_tcp_pair(gloo::Context& context, int peer) { return tcp_pair(context, peer) != nullptr; }

bool tcp_pair_record_send_buffer(gloo::Context& context, int peer, size_t bytes) {
  TcpPair* pair = tcp_pair(context, peer);
  if (pair == nullptr) return false;
  std::lock_guard<std::mutex> lock(Internals::mutex(*pair));
  Internals::send_buffer_size(*pair) = bytes;
  return true;
}

size_t tcp_pair_recorded_send_buffer(gloo::Context& context, int peer) {
  TcpPair* pair = tcp_pair(context, peer);
  if (pair == nullptr) return 0;
  std::lock_guard<std::mutex> lock(Internals::mutex(*pair));
  return Internals::send_buffer_size(*pair);
}

absl::Status tcp_pair_size_send_buffer(gloo::Context& context, int peer, size_t bytes) {
  TcpPair* pair = tcp_pair(context, peer);
  if (pair == nullptr) return absl::OkStatus();
  std::lock_guard<std::mutex> lock(Internals::mutex(*pair));
  const int fd = Internals::fd(*pair);
  if (fd < 0) return absl::OkStatus();
  int request = static_cast<int>(bytes);
  if (setsockopt(fd, SOL_SOCKET, SO_SNDBUF, &request, sizeof(request)) != 0) {
    return absl::InternalError(strerror(errno));
  }
  Internals::send_buffer_size(*pair) = bytes;
  return absl::OkStatus();
}

size_t tcp_pair_socket_send_buffer(gloo::Context& context, int peer) {
  TcpPair* pair = tcp_pair(context, peer);
  if (pair == nullptr) return 0;
  std::lock_guard<std::mutex> lock(Internals::mutex(*pair));
  int bytes = 0;
  socklen_t len = sizeof(bytes);
  if (getsockopt(Internals::fd(*pair), SOL_SOCKET, SO_SNDBUF, &bytes, &len) != 0) return 0;
  return static_cast<size_t>(bytes);
}

bool tcp_pair_set_sync(gloo::Context& context, int peer) {
  TcpPair* pair = tcp_pair(context, peer);
  if (pair == nullptr) return false;
  // Busy polling would keep a core spinning per waiting op: on a machine
  // with fewer cores than ranks it takes the CPU the peers need.
  pair->setSync(/*sync=*/true, /*busyPoll=*/false);
  return true;
}

bool tcp_pair_is_sync(gloo::Context& context, int peer) {
  TcpPair* pair = tcp_pair(context, peer);
  return pair != nullptr && Internals::is_sync(*pair);
}

int tcp_pair_socket(gloo::Context& context, int peer) {
  TcpPair* pair = tcp_pair(context, peer);
  if (pair == nullptr) return -1;
  std::lock_guard<std::mutex> lock(Internals::mutex(*pair));
  return Internals::fd(*pair);
}

absl::Status tcp_pair_set_io_timeout(gloo::Context& context, int peer,
                                     std::chrono::milliseconds timeout) {
  TcpPair* pair = tcp_pair(context, peer);
  if (pair == nullptr) return absl::OkStatus();
  struct timeval tv = {};
  tv.tv_sec = static_cast<time_t>(timeout.count() / 1000);
  tv.tv_usec = static_cast<suseconds_t>((timeout.count() % 1000) * 1000);
  std::lock_guard<std::mutex> lock(Internals::mutex(*pair));
  const int fd = Internals::fd(*pair);
  if (fd < 0) return absl::OkStatus();  // closed: an op fails on it anyway
  if (setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv)) != 0 ||
      setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof(tv)) != 0) {
    return absl::InternalError(
        absl::StrCat("setsockopt(SO_RCVTIMEO/SO_SNDTIMEO): ", strerror(errno)));
  }
  return absl::OkStatus();
}

void tcp_pairs_close_and_settle(gloo::Context& context, const std::string& reason) {
  for (int peer = 0; peer < context.size; ++peer) {
    TcpPair* pair = tcp_pair(context, peer);
    if (pair == nullptr) continue;
    // Closing unregisters a live pair from the device loop and waits for
    // the loop's next tick; a pair that failed on the device thread closed
    // itself there, without that wait.
    Internals::fail_and_close(*pair, reason);
    // The device thread handles a pair's events only under its lock (it
    // try-locks and skips the pair otherwise), so once the lock is free the
    // handler that failed the pair (and signalled the buffers) has returned.
    std::lock_guard<std::mutex> settled(Internals::mutex(*pair));
  }
}

std::mutex* tcp_pair_mutex(gloo::Context& context, int peer) {
  TcpPair* pair = tcp_pair(context, peer);
  return pair == nullptr ? nullptr : &Internals::mutex(*pair);
}

PairReport report_pairs(gloo::Context& context, const std::string& cause) {
  PairReport report;
  for (int peer = 0; peer < context.size; ++peer) {
    TcpPair* pair = tcp_pair(context, peer);
    if (pair == nullptr) continue;
    bool recv, send;
    std::string address;
    {
      std::lock_guard<std::mutex> lock(Internals::mutex(*pair));
      recv = Internals::has_pending_recv(*pair);
      send = Internals::has_pending_send(*pair);
      address = Internals::peer_address(*pair);
    }
    if (recv) report.no_data.push_back(peer);
    if (send) report.not_asked.push_back(peer);
    if (names(cause, address)) report.named.push_back(peer);
  }
  return report;
}

}  // namespace ddpx
