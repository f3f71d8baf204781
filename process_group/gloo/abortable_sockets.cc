#include "process_group/gloo/abortable_sockets.h"

#include <sys/socket.h>
#include <sys/stat.h>

#include "gloo/context.h"

#include "process_group/gloo/tcp_pair_access.h"

namespace ddpx {

void AbortableSockets::record(gloo::Context& context) {
  for (int peer = 0; peer < context.size; ++peer) {
    const int fd = tcp_pair_socket(context, peer);
    struct stat st = {};
    if (fd < 0 || fstat(fd, &st) != 0 || !S_ISSOCK(st.st_mode)) continue;
    sockets_.push_back(Recorded{fd, st.st_dev, st.st_ino});
  }
}

void AbortableSockets::shut_down() const {
  for (const Recorded& s : sockets_) {
    struct stat st = {};
    if (fstat(s.fd, &st) != 0 || st.st_dev != s.dev || st.st_ino != s.ino) continue;
    shutdown(s.fd, SHUT_RDWR);
  }
}

}  // namespace ddpx
