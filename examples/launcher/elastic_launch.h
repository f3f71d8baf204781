// The local launch of an elastic job (--elastic with --nproc): the
// launcher serves the job's store itself (so it outlives every rank, rank
// 0 included), starts the ranks, and when one ends:
//  - records it in the store (elastic::mark_gone), so the survivors count
//    it gone at once instead of waiting for its heartbeat to go stale;
//  - on a failure, with restarts left (--max_restarts, over the whole job),
//    starts a replacement, which the job admits at its next step boundary;
//  - never stops the others: the job goes on with whoever is alive.
// It returns once every rank has ended: 0 when any rank finished training
// (exit status 0), else the first failure's status.
#ifndef DDPX_EXAMPLES_LAUNCHER_ELASTIC_LAUNCH_H_
#define DDPX_EXAMPLES_LAUNCHER_ELASTIC_LAUNCH_H_

#include <string>

#include "examples/launcher/launcher.h"

namespace ddpx::launcher {

struct ElasticLaunchOptions {
  LaunchOptions ranks;       // nproc, program, args, master address and port
  int max_restarts = 0;      // replacements started in all
  std::string store_prefix;  // the ranks' job prefix in the store (elastic_group.h)
};

LaunchResult launch_elastic_ranks(const ElasticLaunchOptions& options);

}  // namespace ddpx::launcher

#endif  // DDPX_EXAMPLES_LAUNCHER_ELASTIC_LAUNCH_H_
