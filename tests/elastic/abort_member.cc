// One process of tests/elastic:abort_in_flight_test: joins an elastic group
// of 3 over the test's store (--port), runs one allreduce with every member,
// then either stops itself (the group's rank 2: SIGSTOP, before its next
// allreduce) or starts an allreduce of --bytes with a 60 s timeout that waits
// for the stopped rank, and reports how long it took to fail and why:
//   "rank 0: failed after 1.234 s: <message>"
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <chrono>
#include <memory>
#include <string>

#include "elastic/elastic_group.h"
#include "store/prefix_store.h"
#include "store/tcp_store.h"

namespace {

int flag(int argc, char** argv, const char* name) {
  const size_t n = strlen(name);
  for (int i = 1; i < argc; ++i) {
    if (strncmp(argv[i], name, n) == 0 && argv[i][n] == '=') return atoi(argv[i] + n + 1);
  }
  fprintf(stderr, "abort_member: missing %s=\n", name);
  exit(2);
}

}  // namespace

int main(int argc, char** argv) {
  using namespace ddpx;
  TCPStoreOptions so;
  so.port = static_cast<uint16_t>(flag(argc, argv, "--port"));
  auto client = TCPStore::create("127.0.0.1", so);
  if (!client.ok()) {
    fprintf(stderr, "store: %s\n", client.status().ToString().c_str());
    return 2;
  }
  elastic::ElasticOptions o;
  o.store = std::make_shared<PrefixStore>("job/", std::shared_ptr<Store>(std::move(*client)));
  o.expected_size = 3;
  o.min_size = 1;
  o.timeout = std::chrono::seconds(60);
  o.heartbeat_interval = std::chrono::milliseconds(250);
  o.join_timeout = std::chrono::seconds(60);
  auto group = elastic::ElasticGroup::join(o);
  if (!group.ok()) {
    fprintf(stderr, "join: %s\n", group.status().ToString().c_str());
    return 2;
  }
  const int rank = (*group)->rank();
  Tensor warm = Tensor::from_vector<float>({1.0f});
  if (absl::Status s = (*group)->pg()->allreduce({warm})->wait(); !s.ok()) {
    fprintf(stderr, "rank %d: warm-up: %s\n", rank, s.ToString().c_str());
    return 2;
  }
  if (rank == 2) {
    printf("rank 2: stopping\n");
    fflush(stdout);
    raise(SIGSTOP);
    _exit(0);  // continued: the others are gone or going
  }
  const int64_t floats = flag(argc, argv, "--bytes") / 4;
  Tensor t = Tensor::zeros({floats}, DType::kFloat32);
  const auto start = std::chrono::steady_clock::now();
  absl::Status s = (*group)->pg()->allreduce({t})->wait();
  const double took =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  printf("rank %d: %s after %.3f s: %s\n", rank, s.ok() ? "succeeded" : "failed", took,
         std::string(s.message()).c_str());
  fflush(stdout);
  (*group)->finish();
  return s.ok() ? 1 : 0;
}
