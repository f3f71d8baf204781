#!/usr/bin/env bash
# An elastic job started by `srun -N 2 --ntasks-per-node=2` (docs/elastic.md,
# docs/multi_host.md): tools/slurm_local runs slurmctld and a slurmd on each
# of two virtual hosts (tools/virtual_cluster), srun starts 4 tasks of
# examples/train --elastic --init=env://, which read their world size from
# SLURM_NTASKS and reach the job's store at MASTER_ADDR/MASTER_PORT: a
# tcp_store_server on the first host, outside every task. Task 0 gets
# kill -9 mid-training; with --kill-on-bad-exit=0 srun leaves the other
# tasks running, and they re-form, finish the epoch and end with
# bit-identical parameters. Skips loudly where network namespaces cannot
# be made (not root); fails where SLURM is missing (tools/setup installs
# it).
set -euo pipefail
train=$PWD/examples/train
here=$(dirname "$(readlink -f "$0")")
if ! command -v srun >/dev/null || ! command -v munged >/dev/null; then
  echo "FAIL: slurm-wlm/munge not installed (tools/setup installs them)"; exit 1
fi
. "$here/../integration/virtual_hosts.sh"
virtual_hosts_up l "an elastic srun job losing a task"
. "$here/host_loss_job.sh"
[ -x "$tools/slurm_local" ] || { echo "FAIL: tools/slurm_local not found"; exit 1; }

port=$((20000 + $$ % 20000))
start_store "$port"
metrics=$TEST_TMPDIR/metrics.jsonl
job_id=slurm_elastic_$$
MASTER_ADDR=$store_addr MASTER_PORT=$port "$tools/slurm_local" run --virtual-cluster="$name" -- \
  srun -N 2 --ntasks-per-node=2 --kill-on-bad-exit=0 env OPENBLAS_NUM_THREADS=1 \
  "$train" --elastic --init=env:// --job_id="$job_id" --iface=eth0 --hidden=128,128 \
  --batch_size=32 --train_limit=19200 --epochs=1 --log_every=1000 --timeout_s=10 \
  --heartbeat_s=0.5 --metrics_out="$metrics" >"$TEST_TMPDIR/srun.log" 2>&1 &
srun_pid=$!

# The task srun started as task 0: this job's trainer with SLURM_PROCID=0.
task_pid() {
  local p
  for p in $(pgrep -f -- "--job_id=$job_id" || true); do
    if grep -qxz "SLURM_PROCID=$1" "/proc/$p/environ" 2>/dev/null &&
      [ "$(readlink "/proc/$p/exe")" = "$(readlink -f "$train")" ]; then
      echo "$p"; return
    fi
  done
}

wait_step "$metrics" 30 "$srun_pid" || { cat "$TEST_TMPDIR/srun.log"; exit 1; }
victim=$(task_pid 0)
[ -n "$victim" ] || { cat "$TEST_TMPDIR/srun.log"; echo "FAIL: task 0 not found"; exit 1; }
kill -9 "$victim"
status=0
wait "$srun_pid" || status=$?
out=$(cat "$TEST_TMPDIR/srun.log")
echo "$out"
echo "srun ended with status $status (task 0 was killed)"
expect_reformed_on 3 "$out"
echo "PASS: srun -N 2 --ntasks-per-node=2, task 0 killed: the other 3 tasks finished with equal parameters"
