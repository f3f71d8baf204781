#!/usr/bin/env bash
# A whole host lost from an elastic job (docs/elastic.md): two virtual
# hosts (tools/virtual_cluster: their own network, UTS, IPC and mount
# namespaces, /dev/shm and host name) run examples/train --elastic with two
# ranks each, the store served on the first host by tcp_store_server, the
# gradients through the hierarchical int8 hook (--hook=int8:hierarchical=1:
# reduce-scatter on each host's shared memory, int8 across the hosts) and
# the two-level allreduce. Both ranks of the second host get kill -9 at
# once, mid-training, with no launcher to record their end: the two on the
# first host re-form (the heartbeat finds the dead), find the host topology
# again (one host: no two-level allreduce, the hook's host groups are that
# host's two ranks), finish the epoch and end with bit-identical
# parameters. Skips loudly where network namespaces cannot be made (not
# root).
set -euo pipefail
train=$PWD/examples/train
here=$(dirname "$(readlink -f "$0")")
. "$here/../integration/virtual_hosts.sh"
virtual_hosts_up e "the loss of a whole host from an elastic job"
. "$here/host_loss_job.sh"

port=$((20000 + $$ % 20000))
start_store "$port"
metrics=$TEST_TMPDIR/metrics.jsonl
pids=()
for r in 0 1 2 3; do
  "$vc" run "$name-h$((r / 2 + 1))" -- env OPENBLAS_NUM_THREADS=1 \
    "$train" --elastic --init="tcp://$store_addr:$port" --world_size=4 --rank=$r --job_id=host_loss \
    --iface=eth0 --hook=int8:hierarchical=1 --hidden=128,128 --batch_size=32 --train_limit=19200 \
    --epochs=1 --log_every=1000 --timeout_s=10 --heartbeat_s=0.5 --metrics_out="$metrics" \
    >"$TEST_TMPDIR/rank$r.log" 2>&1 &
  pids+=($!)
done
logs() { for r in 0 1 2 3; do echo "--- rank $r"; cat "$TEST_TMPDIR/rank$r.log"; done; }

# 150 steps of 4 x 32 (fewer samples a step on 2 ranks: more steps).
wait_step "$metrics" 30 "${pids[0]}" || { logs; exit 1; }
kill -9 "${pids[2]}" "${pids[3]}"
start=$SECONDS
for r in 0 1; do
  wait "${pids[$r]}" || { logs; echo "FAIL: rank $r of the first host failed"; exit 1; }
done
echo "the first host's ranks finished $((SECONDS - start)) s after the second host's were killed"
out=$(cat "$TEST_TMPDIR/rank0.log" "$TEST_TMPDIR/rank1.log")
echo "$out"
# Before the loss: two levels across 2 hosts. After it no rank sets them up
# again (one host), so the line is printed once, by generation 0's rank 0.
lines=$(logs | grep -c "go in two levels across 2 hosts x 2 ranks" || true)
[ "$lines" = 1 ] || { logs; echo "FAIL: the two-level line was printed $lines times (expected once, in generation 0)"; exit 1; }
expect_reformed_on 2 "$out"
acc=$(sed -n 's/^done: .* test accuracy \([0-9.]*\)%.*/\1/p' <<<"$out")
awk -v a="$acc" 'BEGIN { exit !(a > 60) }' || { echo "FAIL: accuracy $acc% <= 60%"; exit 1; }
echo "PASS: a host of 2 lost; the other host's 2 ranks re-formed, finished at $acc% with equal parameters"
