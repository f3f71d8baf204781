// Leaving a group without resetting a peer's connection.
//
// A rank that finishes its last op first and closes its sockets at once can
// fail a peer still finishing that op (Gloo reports the closed or reset
// connection to every op waiting on that pair, and some of Gloo's algorithms
// return before their last send is flushed). So before the sockets close,
// every rank tells every peer "done" and waits for the peers' "done": a peer
// sends it only after all its own ops ended, so after that nobody needs
// anything more from this rank.
//
// The wait is bounded twice: the destructor waits at most `grace` (a rank
// leaving long before its peers must not stall, and callers that destroy
// all ranks' groups one after another from one thread would otherwise
// wait for peers that cannot answer yet), then a background thread keeps
// the connections open until the peers answered or `limit` passed. A dead
// peer ends the wait at once (its pair reports the error).
#ifndef DDPX_PROCESS_GROUP_GLOO_CLOSING_HANDSHAKE_H_
#define DDPX_PROCESS_GROUP_GLOO_CLOSING_HANDSHAKE_H_

#include <chrono>
#include <memory>
#include <vector>

namespace gloo {
class Context;
}

namespace ddpx {

// Runs the handshake on `context` (used by nothing else any more) and keeps
// `keep_alive` (what closes the sockets when released: contexts, the device)
// alive until it ends.
void close_after_peers(std::shared_ptr<gloo::Context> context,
                       std::vector<std::shared_ptr<void>> keep_alive,
                       std::chrono::milliseconds grace,
                       std::chrono::milliseconds limit);

}  // namespace ddpx

#endif  // DDPX_PROCESS_GROUP_GLOO_CLOSING_HANDSHAKE_H_
