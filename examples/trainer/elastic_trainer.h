// The training loop in elastic mode (--elastic; docs/elastic.md): the same
// model step (train_step.h) over an elastic::ElasticGroup, whose members
// may die, stop or arrive while it runs.
//
// Each step is voted (ElasticGroup::should_commit) between the gradients'
// synchronization and the optimizer step, so a step commits on every live
// rank or on none. A failed step is discarded (the parameters and the
// optimizer were not touched yet, and the data cursor did not move), the
// survivors form the next generation, the gradient synchronization is
// rebuilt over its group, and the same step is taken again. Processes
// admitted into a generation get the full state from its rank 0 over the
// group. Data: elastic/epoch_plan.h. Rank 0 of each generation prints the
// progress lines and writes --metrics_out, with one
// {"type":"membership",...} line per change.
#ifndef DDPX_EXAMPLES_TRAINER_ELASTIC_TRAINER_H_
#define DDPX_EXAMPLES_TRAINER_ELASTIC_TRAINER_H_

#include <memory>

#include "absl/status/statusor.h"
#include "elastic/elastic_group.h"
#include "examples/trainer/train_step.h"
#include "examples/trainer/trainer.h"

namespace ddpx::trainer {

// Trains until the epochs (or --max_steps) are done on whichever ranks are
// alive. Errors: the group fell below its minimum (FailedPrecondition
// naming it), this process was refused, or the store is gone.
absl::StatusOr<TrainSummary> train_elastic(const TrainConfig& config,
                                           elastic::ElasticGroup& group, TrainStep& step);

}  // namespace ddpx::trainer

#endif  // DDPX_EXAMPLES_TRAINER_ELASTIC_TRAINER_H_
