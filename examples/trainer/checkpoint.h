// Checkpoints as one atomic unit across ranks.
//
// Layout of --checkpoint_dir:
//
//   step-00000045/state.bin          rank 0: progress, model, optimizer
//   step-00000045/hook_rank<R>.bin   rank R: its communication-hook state
//   step-00000045/MANIFEST           written last: step, world size, each
//                                    file's size and CRC32C
//   latest                           "step-00000045\n", replaced atomically
//   LOCK                             the job that owns the folder
//                                    (checkpoint_lock.h; rank 0 holds it)
//
// save_checkpoint (every rank calls it): rank 0 prepares the step's folder;
// every rank writes its files (temporary name, fsync, rename); the ranks
// agree through the process group that all files are on disk, with their
// sizes and checksums; only then rank 0 writes the MANIFEST, then `latest`,
// then removes all but the newest --keep_checkpoints complete checkpoints up
// to this step (never a complete one past it) and incomplete folders. A
// folder without a MANIFEST is incomplete and never resumed from, so a crash
// at any instant leaves the checkpoint `latest` names (or the newest
// complete one before the first `latest`) whole and usable.
//
// resume_from_checkpoint validates before it trusts: the MANIFEST's own
// checksum, its step against the folder, its file list against the job,
// every file's size and CRC32C, every header field against the run
// (checkpoint_format.h), and the hook's identity and iteration. Any failure
// is one line naming the file and the field; with ResumeMode::kAuto the
// ranks fall back together to the previous complete checkpoint instead, but
// only when the failure proves damage (checksum or size, a missing file, a
// header or manifest that does not parse or fit): an I/O error, or a
// checkpoint of another world size or hook, stops the resume with its
// message in either mode. After resuming from step S, rank 0 renames every
// complete checkpoint newer than S to step-N.not-resumed, out of reach of
// pruning and of this run's saves of the same steps.
#ifndef DDPX_EXAMPLES_TRAINER_CHECKPOINT_H_
#define DDPX_EXAMPLES_TRAINER_CHECKPOINT_H_

#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "examples/nn/mlp.h"
#include "examples/nn/sgd.h"
#include "examples/trainer/checkpoint_format.h"
#include "examples/trainer/grad_sync.h"
#include "process_group/front_end/process_group.h"

namespace ddpx::trainer {

enum class ResumeMode {
  kLatest,  // the checkpoint `latest` names; refuse if it does not validate
  kAuto,    // that one, else the newest older complete one that validates;
            // only proved damage falls back (see above)
};
// "latest" or "auto"; the error names the flag and the choices.
absl::StatusOr<ResumeMode> parse_resume_mode(const std::string& text);

struct CheckpointOptions {
  std::string dir;
  int keep = 2;  // complete checkpoints kept on disk (>= 1)
  ResumeMode resume = ResumeMode::kLatest;
  // Resume without the saved hook state (the hook starts afresh); required
  // to resume with another --hook.
  bool reset_hook_state = false;
  std::string hook;  // this run's hook spec, canonical; stored in hook files
  // Written into DIR/LOCK by the rank that holds it (checkpoint_lock.h).
  std::string job_id;
  int64_t epochs = 0;
  int64_t steps_per_epoch = 0;
};

inline constexpr char kLatestFile[] = "latest";
std::string step_dir_name(int64_t step);  // "step-00000045"

// Collective: every rank of `pg` calls it with the same progress. Returns
// once this rank's part is durable and, on rank 0, the checkpoint is
// committed (MANIFEST and `latest`). An error on any rank's files fails the
// save on every rank, and nothing is committed.
absl::Status save_checkpoint(const CheckpointOptions& options, ProcessGroup& pg,
                             const Progress& progress, const TrainState& state,
                             const GradientSync& sync);
absl::Status save_checkpoint(const CheckpointOptions& options, ProcessGroup& pg,
                             const Progress& progress, const nn::Mlp& model,
                             const nn::Sgd& optimizer, const GradientSync& sync);

// Collective. std::nullopt when the folder holds no complete checkpoint (a
// fresh run); otherwise the progress of the checkpoint every rank loaded.
absl::StatusOr<std::optional<Progress>> resume_from_checkpoint(
    const CheckpointOptions& options, ProcessGroup& pg, TrainState& state, GradientSync& sync);
absl::StatusOr<std::optional<Progress>> resume_from_checkpoint(
    const CheckpointOptions& options, ProcessGroup& pg, nn::Mlp& model, nn::Sgd& optimizer,
    GradientSync& sync);

// One rank's part of resuming, without the process group: validates the
// MANIFEST of `step_dir`, state.bin and this rank's hook file (skipped with
// reset_hook_state) and loads them.
absl::StatusOr<Progress> load_rank_checkpoint(const CheckpointOptions& options,
                                              const std::string& step_dir, int rank,
                                              int world_size, TrainState& state,
                                              GradientSync& sync);
absl::StatusOr<Progress> load_rank_checkpoint(const CheckpointOptions& options,
                                              const std::string& step_dir, int rank,
                                              int world_size, nn::Mlp& model,
                                              nn::Sgd& optimizer, GradientSync& sync);

// A checkpoint that one process writes alone, for a job whose ranks all
// hold the same state (an elastic job: its generation's rank 0 writes; no
// collective, so a rank that dies meanwhile cannot fail the save). Takes
// the folder's LOCK (FailedPrecondition, naming the holder, while another
// process holds it), then as save_checkpoint: the step's folder, the file
// `name` (temporary name, fsync, rename), the MANIFEST (world_size 1, the
// one file), `latest`, pruning. A complete checkpoint of `step` already on
// disk is left as it is (every writer's state at `step` is the same).
// Checkpoint fault points (checkpoint_fault.h) as save_checkpoint's, the
// file's under "state/".
absl::Status save_single_writer_checkpoint(const CheckpointOptions& options, int64_t step,
                                           int rank, const std::string& name,
                                           const std::string& contents);
// Takes the LOCK and resumes as resume_from_checkpoint does (the candidate
// `latest` names, then with kAuto the older complete ones when the newer
// is proved damaged; newer complete ones set aside): each candidate's
// MANIFEST must list `name` alone, whose size and CRC32C are checked
// before `load` parses it (its error is the candidate's). The step loaded,
// or nullopt when the folder holds no complete checkpoint.
absl::StatusOr<std::optional<int64_t>> resume_single_writer_checkpoint(
    const CheckpointOptions& options, const std::string& name,
    const std::function<absl::Status(const std::string& path, const std::string& contents)>&
        load);

// The steps of the complete checkpoints (folders with a MANIFEST) in `dir`,
// newest first.
std::vector<int64_t> complete_checkpoint_steps(const std::string& dir);

}  // namespace ddpx::trainer

#endif  // DDPX_EXAMPLES_TRAINER_CHECKPOINT_H_
