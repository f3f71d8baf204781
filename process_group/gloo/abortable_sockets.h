// The TCP sockets of a Gloo backend's pairs, recorded once the group has
// connected, so that GlooBackend::abort can end every op waiting on them
// from any thread. Gloo's own way of failing a pair (tcp_pairs_close_and_
// settle) takes the pair's lock, which a sync pair's reader holds for the
// whole of its blocking recv() (sync_pairs.h): it would wait for that
// read's timeout. shutdown(2) needs no lock: the blocked recv() returns the
// end of the stream, the event loop's pairs see it too, and Gloo fails each
// pending op on them ("Connection closed by peer"); the peers see the
// connection end as well.
#ifndef DDPX_PROCESS_GROUP_GLOO_ABORTABLE_SOCKETS_H_
#define DDPX_PROCESS_GROUP_GLOO_ABORTABLE_SOCKETS_H_

#include <sys/types.h>

#include <vector>

namespace gloo {
class Context;
}

namespace ddpx {

class AbortableSockets {
 public:
  // Records the socket of each of `context`'s connected TCP pairs.
  void record(gloo::Context& context);
  // Shuts down (both directions) each recorded socket that is still open
  // under its number. Gloo closes a pair's socket when the pair fails, and
  // the number may then name another file: a socket is recognized by its
  // device and inode (fstat), which no other open file shares.
  void shut_down() const;
  size_t size() const { return sockets_.size(); }

 private:
  struct Recorded {
    int fd;
    dev_t dev;
    ino_t ino;
  };
  std::vector<Recorded> sockets_;
};

}  // namespace ddpx

#endif  // DDPX_PROCESS_GROUP_GLOO_ABORTABLE_SOCKETS_H_
