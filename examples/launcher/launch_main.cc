// launch --nproc=N [--master_port=P] -- program [args...]
// Runs N local ranks of `program` with the env:// rendezvous variables set.
#include <cstdio>
#include <string>
#include <vector>

#include "absl/flags/flag.h"
#include "absl/flags/parse.h"
#include "absl/flags/usage.h"
#include "examples/launcher/launcher.h"

ABSL_FLAG(int, nproc, 1, "Number of local ranks to start.");
ABSL_FLAG(std::string, master_addr, "127.0.0.1", "MASTER_ADDR for the ranks.");
ABSL_FLAG(int, master_port, 0, "MASTER_PORT for the ranks (0: pick a free one).");

int main(int argc, char** argv) {
  absl::SetProgramUsageMessage("launch --nproc=N -- program [args...]");
  std::vector<char*> rest = absl::ParseCommandLine(argc, argv);
  if (rest.size() < 2) {
    fprintf(stderr, "launch: no program given (usage: launch --nproc=N -- program [args...])\n");
    return 2;
  }
  ddpx::launcher::LaunchOptions o;
  o.nproc = absl::GetFlag(FLAGS_nproc);
  o.master_addr = absl::GetFlag(FLAGS_master_addr);
  o.master_port = absl::GetFlag(FLAGS_master_port);
  o.program = rest[1];
  for (size_t i = 2; i < rest.size(); ++i) o.args.push_back(rest[i]);
  ddpx::launcher::LaunchResult r = ddpx::launcher::launch_local_ranks(o);
  if (r.exit_code != 0) fprintf(stderr, "%s\n", r.message.c_str());
  return r.exit_code;
}
