#!/usr/bin/env bash
# `srun -N 2 --ntasks-per-node=2` across two virtual hosts: tools/slurm_local
# runs slurmctld on the first host of a tools/virtual_cluster and a slurmd on
# each, and the trainer's 4 ranks read SLURM's variables (--init=env://),
# bind the hosts' eth0 (--iface) and train, two ranks per host. Skips loudly
# where network namespaces cannot be made (not root); fails where SLURM is
# missing (tools/setup installs it).
set -euo pipefail
train=$PWD/examples/train
if ! command -v srun >/dev/null || ! command -v munged >/dev/null; then
  echo "FAIL: slurm-wlm/munge not installed (tools/setup installs them)"; exit 1
fi
. "$(dirname "$0")/virtual_hosts.sh"
virtual_hosts_up s "srun across hosts"
[ -x "$tools/slurm_local" ] || { echo "FAIL: tools/slurm_local not found"; exit 1; }
out=$("$tools/slurm_local" run --virtual-cluster="$name" -- srun -N 2 --ntasks-per-node=2 \
  "$train" --init=env:// --iface=eth0 --hidden=256 --batch_size=32 --train_limit=4096 \
  --epochs=1 --log_every=1000 --timeout_s=60 2>&1) || { echo "$out"; echo "FAIL: the srun job failed"; exit 1; }
echo "$out"
grep -q "4 ranks x batch 32" <<<"$out" || { echo "FAIL: not a 4-rank job"; exit 1; }
grep -q "go in two levels across 2 hosts x 2 ranks" <<<"$out" ||
  { echo "FAIL: SLURM did not place two ranks on each of the two hosts"; exit 1; }
acc=$(sed -n 's/^done: .* test accuracy \([0-9.]*\)%.*/\1/p' <<<"$out")
[ -n "$acc" ] || { echo "FAIL: no final accuracy"; exit 1; }
awk -v a="$acc" 'BEGIN { exit !(a > 50) }' || { echo "FAIL: accuracy $acc% <= 50%"; exit 1; }
echo "PASS: srun -N 2 --ntasks-per-node=2 across two virtual hosts trained to $acc%"
