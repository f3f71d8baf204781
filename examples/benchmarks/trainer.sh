# Sourced by the benchmark scripts that run //examples:train, once they
# have defined `die`:
#   . "$(dirname "$0")/trainer.sh" 2>/dev/null ||
#     . "$0.runfiles/ddpx/examples/benchmarks/trainer.sh"
# Sources bench_env.sh beside it (`here`, `workspace`, built_binary,
# run_anchor) and sets TRAIN, the trainer binary (a TRAIN the user set wins;
# otherwise the built //examples:train); dies saying how to build it.
. "$(dirname "${BASH_SOURCE[0]}")/bench_env.sh"
[ -n "${TRAIN:-}" ] || TRAIN=$(built_binary examples/train) || true
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
