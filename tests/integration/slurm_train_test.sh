#!/usr/bin/env bash
# A 2-task `srun` training job on a one-node SLURM cluster started by
# tools/slurm_local: the trainer finds rank, world size and master address in
# SLURM's environment (--init=env://) and trains.
#
#   slurm_train_test.sh TRAINER STEPS MIN_ACCURACY [TRAINER FLAGS...]
#
# TRAINER (examples/train or examples/torch/train, as the BUILD rule's args
# give it) runs STEPS steps on 2 tasks and must end above MIN_ACCURACY
# percent. Fails where SLURM or root is missing.
set -euo pipefail
. "$(dirname "$0")/two_rank_job.sh"
trainer=$PWD/$1 steps=$2 min_acc=$3
shift 3
# From runfiles once tools/ exports it; until then next to this script's
# source (runfiles are symlinks into the source tree).
slurm_local=tools/slurm_local
[ -x "$slurm_local" ] || slurm_local="$(dirname "$(readlink -f "$0")")/../../tools/slurm_local"
[ -x "$slurm_local" ] || { echo "FAIL: tools/slurm_local not found (PWD=$PWD)"; exit 1; }
if ! command -v srun >/dev/null || ! command -v munged >/dev/null; then
  echo "FAIL: slurm-wlm/munge not installed (tools/setup installs them)"; exit 1
fi
if [ "$(id -u)" != 0 ]; then echo "FAIL: tools/slurm_local needs root"; exit 1; fi
out=$("$slurm_local" run -- srun -n 2 "$trainer" --init=env:// --max_steps="$steps" "$@" 2>&1) || {
  echo "$out"; echo "FAIL: the srun job failed"; exit 1; }
echo "$out"
expect_two_rank_job "$out" "$steps" "$min_acc" "srun -n 2"
