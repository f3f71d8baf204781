// The one place that reaches into Gloo's TCP pairs (gloo::transport::tcp::
// Pair) beyond the public gloo::transport::Pair interface. Six protected
// fields of libgloo 0.5's tcp::Pair (Debian's 0.0~git20220518.5b14351) are
// read or written here, without patching the library: `m_` (the pair's
// lock), `sendBufferSize_` (the SO_SNDBUF Gloo last set), `fd_` (the
// socket), `sync_` (sync mode), and `localPendingRecv_` /
// `localPendingSend_` (unbound-buffer operations waiting on the peer, for
// naming the peers a failed op waited for). One protected function is
// called: `signalExceptionExternal` (fail a pair's pending ops and close
// it, as Gloo's own op timeout does). Package-private:
// send_buffer_autotuning, sync_pairs, the closing handshake and the Gloo
// backend's error path use it.
//
// That ties the build to libgloo 0.5's declaration of tcp::Pair. A Gloo
// whose tcp::Pair differs fails to build in tcp_pair_access.cc (each
// static_assert says what to check), or, for what only a live pair shows,
// fails //tests/process_group/gloo:tcp_pair_access_test, which checks every
// function below against what Gloo and the kernel report.
//
// Each function takes the pair of `context` to `peer`; where there is none
// (`peer` is this rank, or the pair is not a TCP pair) setters return false
// and getters 0, false, -1 or null.
#ifndef DDPX_PROCESS_GROUP_GLOO_TCP_PAIR_ACCESS_H_
#define DDPX_PROCESS_GROUP_GLOO_TCP_PAIR_ACCESS_H_

#include <chrono>
#include <cstddef>
#include <mutex>
#include <string>
#include <vector>

#include "absl/status/status.h"

namespace gloo {
class Context;
}

namespace ddpx {

bool is_tcp_pair(gloo::Context& context, int peer);

// Records `bytes` as the SO_SNDBUF Gloo last set on the pair (under the
// pair's lock, where Gloo reads it). Gloo's bound-buffer send path only
// ever grows the socket's buffer to the message size, so it will not call
// setsockopt for any message up to `bytes`.
bool tcp_pair_record_send_buffer(gloo::Context& context, int peer, size_t bytes);
// What Gloo has recorded as the SO_SNDBUF it last set (0 before any).
size_t tcp_pair_recorded_send_buffer(gloo::Context& context, int peer);

// Asks the kernel for a SO_SNDBUF of `bytes` on the pair's socket and
// records it as above, under the pair's lock. An unconnected pair is left
// alone (OK); a failing setsockopt is the error, with errno's text.
absl::Status tcp_pair_size_send_buffer(gloo::Context& context, int peer, size_t bytes);
// The socket's SO_SNDBUF as getsockopt reports it (Linux: twice the grant).
size_t tcp_pair_socket_send_buffer(gloo::Context& context, int peer);

// Gloo's sync mode (tcp::Pair::setSync(true, false): the thread running an
// op reads its own messages, no busy polling), and whether a pair is in it.
bool tcp_pair_set_sync(gloo::Context& context, int peer);
bool tcp_pair_is_sync(gloo::Context& context, int peer);

// The pair's connected socket; -1 before connecting and after closing.
int tcp_pair_socket(gloo::Context& context, int peer);
// Bounds the socket's blocking reads and writes (SO_RCVTIMEO, SO_SNDTIMEO:
// a sync pair's recv()/send() then end with "Read timeout" / "Write
// timeout"). An unconnected or closed pair is left alone (OK).
absl::Status tcp_pair_set_io_timeout(gloo::Context& context, int peer,
                                     std::chrono::milliseconds timeout);

// What the pairs of `context` say about the peers after an op on it failed:
// the peers whose pair still holds a receive this rank posted (no data came
// from them), those whose pair holds a send they never asked for (they did
// not reach the op), and those whose address `cause` names (Gloo names the
// peer in "Read timeout", "Connection closed by peer", ...). Ascending ranks.
struct PairReport {
  std::vector<int> no_data;
  std::vector<int> not_asked;
  std::vector<int> named;
};
PairReport report_pairs(gloo::Context& context, const std::string& cause);

// Closes every TCP pair of `context` the way Gloo does when an op times out
// (each pending op on it fails with `reason`) and returns once the device
// thread runs no handler of any of them. After that no pair touches an
// unbound buffer posted on `context`, so the buffer may be freed even
// though some of its receives or sends never completed: Gloo's pairs hold
// such buffers by a weak pointer that does not keep them alive while in use.
void tcp_pairs_close_and_settle(gloo::Context& context, const std::string& reason);

// The lock Gloo takes around the fields above (tests check it is Gloo's).
std::mutex* tcp_pair_mutex(gloo::Context& context, int peer);

}  // namespace ddpx

#endif  // DDPX_PROCESS_GROUP_GLOO_TCP_PAIR_ACCESS_H_
