#!/usr/bin/env bash
# Losing the job's store ends an elastic job with a clear message
# (docs/elastic.md, "Protocol"): three ranks started by hand against a
# //store:tcp_store_server on loopback; after step 5 the store server gets
# kill -9. Every rank must end, non-zero, within its timeout (no rank waits
# on the dead store or on each other past --timeout_s), and say that the
# job's store failed; no /dev/shm segment of the job may be left.
set -euo pipefail
train=$PWD/examples/train
store_server=$PWD/store/tcp_store_server
here=$(dirname "$(readlink -f "$0")")
. "$here/host_loss_job.sh"  # last_step, wait_step
tmp=${TEST_TMPDIR:-$(mktemp -d)}

"$store_server" --port=0 --host=127.0.0.1 >"$tmp/store.log" 2>&1 &
store_pid=$!
pids=()
trap 'kill -9 "$store_pid" "${pids[@]}" 2>/dev/null || true' EXIT
port=
for _ in $(seq 1 500); do
  port=$(sed -n 's/^tcp_store_server listening on port \([0-9]*\)$/\1/p' "$tmp/store.log")
  [ -n "$port" ] && break
  kill -0 "$store_pid" 2>/dev/null || break
  sleep 0.02
done
[ -n "$port" ] || { cat "$tmp/store.log"; echo "FAIL: the store server did not start"; exit 1; }

ls /dev/shm | grep "^ddpx\." >"$tmp/shm_before" || true
timeout_s=10
job_id=store_loss_$$
metrics=$tmp/metrics.jsonl
for r in 0 1 2; do
  OPENBLAS_NUM_THREADS=1 "$train" --elastic --init="tcp://127.0.0.1:$port" --world_size=3 \
    --rank="$r" --job_id="$job_id" --hidden=64 --batch_size=32 --epochs=1 --log_every=1000 \
    --timeout_s="$timeout_s" --heartbeat_s=0.5 --metrics_out="$metrics" >"$tmp/rank$r.log" 2>&1 &
  pids+=($!)
done

wait_step "$metrics" 5 "${pids[0]}" || { cat "$tmp"/rank*.log; exit 1; }
kill -9 "$store_pid"
killed_at=$SECONDS
for r in 0 1 2; do
  status=0
  wait "${pids[$r]}" || status=$?
  took=$((SECONDS - killed_at))
  echo "--- rank $r: exit $status, ${took} s after the store was killed"
  tail -5 "$tmp/rank$r.log"
  [ "$status" != 0 ] || { echo "FAIL: rank $r exited 0 without its store"; exit 1; }
  [ "$took" -le $((3 * timeout_s)) ] ||
    { echo "FAIL: rank $r took ${took} s to end (--timeout_s=$timeout_s)"; exit 1; }
  grep -q "the job's store failed while" "$tmp/rank$r.log" ||
    { echo "FAIL: rank $r does not say the job's store failed"; exit 1; }
done
# ddpx's segments (ddpx.*) that appeared during the job and no live process
# maps (tests running beside this one hold theirs).
for seg in $(ls /dev/shm | grep "^ddpx\." | grep -vxF -f "$tmp/shm_before" || true); do
  if ! grep -qsF "/dev/shm/$seg" /proc/[0-9]*/maps; then
    echo "FAIL: /dev/shm/$seg was left behind"; exit 1
  fi
done
echo PASS
