# Sourced by the benchmark scripts once they have defined `die`:
#   . "$(dirname "$0")/trainer.sh" 2>/dev/null ||
#     . "$0.runfiles/ddpx/examples/benchmarks/trainer.sh"
# Sets `here` (the script's directory), `workspace` (the source tree: `bazel
# run`'s BUILD_WORKSPACE_DIRECTORY, else two levels above `here`) and TRAIN,
# the trainer binary (a TRAIN the user set wins), looked for in `bazel run`'s
# runfiles, beside the built script and in the workspace's .bazel/bin;
# otherwise dies saying how to build it.
here=$(cd "$(dirname "$0")" && pwd)
workspace=${BUILD_WORKSPACE_DIRECTORY:-$(cd "$here/../.." && pwd)}
if [ -z "${TRAIN:-}" ]; then
  for candidate in "${RUNFILES_DIR:-/nonexistent}/ddpx/examples/train" "$here/../train" \
                   "$workspace/.bazel/bin/examples/train"; do
    [ -x "$candidate" ] && TRAIN=$candidate && break
  done
fi
[ -x "${TRAIN:-}" ] || die "trainer not found; bazel build //examples:train or set TRAIN=/path/to/train"

# For the step-time benchmarks (step_vs_torch.sh, step_shm.sh): the knobs
# they share, with their defaults (STEPS's is the argument), and `common`,
# the flags of one timed trainer run (seed 0, no logging in the timed part).
step_time_setup() {
  NPROC=${NPROC:-2}
  HIDDEN=${HIDDEN:-2048,2048}
  BATCH=${BATCH:-64}
  HOOK=${HOOK:-allreduce}
  ROUNDS=${ROUNDS:-3}
  STEPS=${STEPS:-$1}
  WARMUP=${WARMUP:-10}
  common=(--nproc="$NPROC" --hidden="$HIDDEN" --batch_size="$BATCH" --hook="$HOOK"
          --max_steps="$STEPS" --log_every=1000 --lr=0.05 --momentum=0.9 --seed=0)
}
