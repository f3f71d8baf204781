// What a trainer's main() does in elastic mode (--elastic and its flags,
// flags.h): launch the ranks with a launcher that serves the store and
// restarts them (examples/launcher/elastic_launch.h), or join the job as
// one rank (elastic/elastic_group.h); the loop then runs over an
// ElasticMembership (elastic_membership.h). Both trainers link it.
#ifndef DDPX_EXAMPLES_TRAINER_ELASTIC_JOIN_H_
#define DDPX_EXAMPLES_TRAINER_ELASTIC_JOIN_H_

#include <memory>
#include <optional>

#include "absl/status/statusor.h"
#include "elastic/elastic_group.h"
#include "process_group/rendezvous/init.h"

namespace ddpx::trainer {

// With --elastic and no launcher's environment: runs the local elastic
// launch of --nproc ranks and returns its exit code. Otherwise nullopt.
std::optional<int> launch_elastic_unless_rank(int argc, char** argv);

// Joins the elastic job as one process: the store at the init method's
// address (env://: MASTER_ADDR:MASTER_PORT; tcp://host:port) as a client
// only (the launcher or tools' store server serves it), the job's keys
// under elastic/<job id>; the first generation waits for `init.world_size`
// processes. Blocks until a generation includes this process.
absl::StatusOr<std::unique_ptr<elastic::ElasticGroup>> join_elastic_job(const InitOptions& init);

}  // namespace ddpx::trainer

#endif  // DDPX_EXAMPLES_TRAINER_ELASTIC_JOIN_H_
