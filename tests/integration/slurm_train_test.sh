#!/usr/bin/env bash
# A 2-task `srun` training job on a one-node SLURM cluster started by
# tools/slurm_local: the trainer finds rank, world size and master address in
# SLURM's environment (--init=env://) and trains. Skips (passing, with a
# message) where SLURM or root is missing.
set -euo pipefail
train=examples/train
# From runfiles once tools/ exports it; until then next to this script's
# source (runfiles are symlinks into the source tree).
slurm_local=tools/slurm_local
[ -x "$slurm_local" ] || slurm_local="$(dirname "$(readlink -f "$0")")/../../tools/slurm_local"
[ -x "$slurm_local" ] || { echo "FAIL: tools/slurm_local not found (PWD=$PWD)"; exit 1; }
if ! command -v srun >/dev/null || ! command -v munged >/dev/null; then
  echo "FAIL: slurm-wlm/munge not installed (tools/setup installs them)"; exit 1
fi
if [ "$(id -u)" != 0 ]; then echo "FAIL: tools/slurm_local needs root"; exit 1; fi
out=$("$slurm_local" run -- srun -n 2 "$train" --init=env:// --hidden=128 \
  --batch_size=32 --max_steps=200 --log_every=100 2>&1) || {
  echo "$out"; echo "FAIL: the srun job failed"; exit 1; }
echo "$out"
grep -q "2 ranks x batch 32" <<<"$out" || { echo "FAIL: not a 2-rank job"; exit 1; }
acc=$(sed -n 's/^done: 200 steps, test accuracy \([0-9.]*\)%.*/\1/p' <<<"$out")
[ -n "$acc" ] || { echo "FAIL: no final accuracy"; exit 1; }
awk -v a="$acc" 'BEGIN { exit !(a > 70) }' || { echo "FAIL: accuracy $acc% <= 70%"; exit 1; }
echo "PASS: srun -n 2 trained to $acc%"
