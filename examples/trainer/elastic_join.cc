#include "examples/trainer/elastic_join.h"

#include <cstdlib>

#include "absl/flags/flag.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "examples/launcher/elastic_launch.h"
#include "examples/trainer/cli.h"
#include "examples/trainer/flags.h"
#include "examples/trainer/init_flags.h"
#include "process_group/rendezvous/launch_env.h"
#include "store/prefix_store.h"
#include "store/tcp_store.h"

namespace ddpx::trainer {

std::optional<int> launch_elastic_unless_rank(int argc, char** argv) {
  if (!elastic_mode() || launched_as_rank(absl::GetFlag(FLAGS_rank), absl::GetFlag(FLAGS_init),
                                          absl::GetFlag(FLAGS_nproc))) {
    return std::nullopt;
  }
  launcher::ElasticLaunchOptions o;
  o.ranks.nproc = absl::GetFlag(FLAGS_nproc);
  o.ranks.program = "/proc/self/exe";
  for (int i = 1; i < argc; ++i) o.ranks.args.push_back(argv[i]);
  std::string job_id = absl::GetFlag(FLAGS_job_id);
  if (job_id.empty()) {
    job_id = new_local_job_id();
    o.ranks.args.push_back("--job_id=" + job_id);
  }
  o.max_restarts = absl::GetFlag(FLAGS_max_restarts);
  o.store_prefix = "elastic/" + job_id;
  launcher::LaunchResult r = launcher::launch_elastic_ranks(o);
  if (r.exit_code != 0) fprintf(stderr, "%s\n", r.message.c_str());
  return r.exit_code;
}

absl::StatusOr<std::unique_ptr<elastic::ElasticGroup>> join_elastic_job(const InitOptions& init) {
  std::string host;
  int port = 0;
  absl::string_view rest = init.init_method;
  if (absl::ConsumePrefix(&rest, "env://")) {
    LaunchEnv env;
    if (absl::Status s = read_master_address([](const char* n) { return std::getenv(n); }, &env);
        !s.ok())
      return s;
    host = env.master_addr;
    port = env.master_port;
  } else if (absl::ConsumePrefix(&rest, "tcp://")) {
    const size_t colon = rest.rfind(':');
    if (colon == absl::string_view::npos || !absl::SimpleAtoi(rest.substr(colon + 1), &port)) {
      return absl::InvalidArgumentError(
          absl::StrCat("--elastic: --init=", init.init_method, ": expected tcp://host:port"));
    }
    host = std::string(rest.substr(0, colon));
  } else {
    return absl::InvalidArgumentError(absl::StrCat(
        "--elastic needs --init=env:// or tcp://host:port (a TCP store served outside the "
        "ranks), got ", init.init_method));
  }
  TCPStoreOptions so;
  so.port = static_cast<uint16_t>(port);
  so.is_master = false;
  so.timeout = std::chrono::seconds(30);
  absl::StatusOr<std::unique_ptr<TCPStore>> store = TCPStore::create(host, so);
  if (!store.ok()) {
    return absl::Status(store.status().code(),
                        absl::StrCat("--elastic: the job's store at ", host, ":", port,
                                     " (served by the launcher or tcp_store_server, never by a "
                                     "rank): ", store.status().message()));
  }
  const double heartbeat = absl::GetFlag(FLAGS_heartbeat_s);
  if (!(heartbeat > 0)) {
    return absl::InvalidArgumentError(absl::StrCat("--heartbeat_s=", heartbeat, ": must be positive"));
  }
  elastic::ElasticOptions o;
  o.store = std::make_shared<PrefixStore>("elastic/" + init.job_id,
                                          std::shared_ptr<Store>(*std::move(store)));
  o.backend = init.backend;
  o.expected_size = init.world_size;
  if (o.expected_size < 1) {  // env://: WORLD_SIZE, SLURM_NTASKS, ...
    absl::StatusOr<LaunchEnv> env = read_launch_env();
    if (!env.ok()) return env.status();
    o.expected_size = env->world_size;
  }
  o.min_size = absl::GetFlag(FLAGS_min_nproc);
  if (o.min_size < 1 || o.min_size > o.expected_size) {
    return absl::InvalidArgumentError(absl::StrCat("--min_nproc=", o.min_size,
                                                   ": must be in [1, ", o.expected_size,
                                                   "] (the world size)"));
  }
  o.timeout = init.timeout;
  // A generation's group connects in well under a second; a member that
  // died meanwhile fails the connect after this, and the next generation
  // forms without it.
  o.connect_timeout = std::max<std::chrono::milliseconds>(init.timeout, std::chrono::seconds(5));
  o.heartbeat_interval = std::chrono::milliseconds(static_cast<int64_t>(heartbeat * 1000));
  return elastic::ElasticGroup::join(o);
}

}  // namespace ddpx::trainer
