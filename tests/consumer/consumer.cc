// A program from another workspace that reuses ddpx's process-group library:
// it forks into two ranks that meet through a file:// rendezvous, allreduce,
// broadcast and barrier, and checks the results.
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <string>

#include "process_group/rendezvous/init.h"

namespace {

int run_rank(const std::string& rendezvous_file, int rank) {
  ddpx::InitOptions options;
  options.backend = "gloo";
  options.init_method = "file://" + rendezvous_file;
  options.rank = rank;
  options.world_size = 2;
  options.timeout = std::chrono::seconds(30);
  auto group = ddpx::init_process_group(options);
  if (!group.ok()) {
    fprintf(stderr, "rank %d: %s\n", rank, group.status().ToString().c_str());
    return 1;
  }
  auto& pg = **group;

  ddpx::Tensor grad = ddpx::Tensor::from_vector<float>({1.0f + rank, 10.0f * rank});
  absl::Status s = pg.allreduce({grad})->get_future()->wait();
  if (!s.ok() || grad.item(0) != 3.0f || grad.item(1) != 10.0f) {
    fprintf(stderr, "rank %d: allreduce wrong: %s\n", rank, s.ToString().c_str());
    return 1;
  }
  ddpx::Tensor token = ddpx::Tensor::from_vector<int64_t>({rank == 0 ? 7 : 0});
  s = pg.broadcast({token})->wait();
  if (!s.ok() || token.item(0) != 7) {
    fprintf(stderr, "rank %d: broadcast wrong: %s\n", rank, s.ToString().c_str());
    return 1;
  }
  s = pg.barrier()->wait();
  if (!s.ok()) return 1;
  printf("consumer rank %d: allreduce, broadcast and barrier OK\n", rank);
  fflush(stdout);  // rank 1 leaves through _exit, which does not flush
  ddpx::destroy_process_group();
  return 0;
}

}  // namespace

int main() {
  char dir_template[] = "/tmp/ddpx_consumer.XXXXXX";
  const char* dir = mkdtemp(dir_template);
  if (dir == nullptr) return 1;
  const std::string file = std::string(dir) + "/rendezvous";
  fflush(stdout);
  pid_t child = fork();
  if (child == 0) _exit(run_rank(file, 1));
  int rc = run_rank(file, 0);
  int status = 0;
  waitpid(child, &status, 0);
  unlink(file.c_str());
  rmdir(dir);
  if (rc != 0 || !WIFEXITED(status) || WEXITSTATUS(status) != 0) {
    fprintf(stderr, "consumer: FAILED\n");
    return 1;
  }
  printf("consumer: OK\n");
  return 0;
}
