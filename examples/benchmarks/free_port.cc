// free_port: prints a TCP port that a socket could bind a moment ago in this
// network namespace, for a benchmark script to hand to its ranks as
// MASTER_PORT (run it inside the virtual host that serves the store).
// The launcher's own choice (launcher::pick_free_port): below the kernel's
// ephemeral range, so no outgoing connection takes it as its local end
// before the store binds it.
#include <cstdio>

#include "examples/launcher/launcher.h"

int main() {
  const int port = ddpx::launcher::pick_free_port();
  if (port <= 0) {
    fprintf(stderr, "free_port: no TCP port could be bound in this network namespace\n");
    return 1;
  }
  printf("%d\n", port);
  return 0;
}
