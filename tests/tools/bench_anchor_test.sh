#!/usr/bin/env bash
# The benchmark scripts' ports and anchor retries, for real: free_port's port
# can be bound, and examples/benchmarks/step_vs_torch.sh (its real ddpx
# trainer and its real anchor, PyTorch DDP over gloo under ddpx's launcher;
# tiny sizes) with the anchor broken on purpose (bench_env.sh's
# DDPX_BENCH_BREAK_ANCHOR: the anchor is given a flag it refuses):
# - first attempt broken: the retry is printed and the RESULT line carries
#   the torch figures of the retried run, anchor_retries=1;
# - both attempts broken: the RESULT line is still printed, exit 0, with "-"
#   for the torch figures and anchor_failures=1;
# - N copies at once (run_anchor --copies), the first attempt broken: every
#   copy runs again, and each ends with its steps;
# - ddpx itself failing (an unknown hook): "ddpx failed", a non-zero status
#   and no RESULT line.
set -euo pipefail

runfiles=${RUNFILES_DIR:-$TEST_SRCDIR}/ddpx
script=$runfiles/examples/benchmarks/step_vs_torch
free_port=$runfiles/examples/benchmarks/free_port
fail() { echo "FAIL: $*" >&2; exit 1; }

port=$("$free_port")
[[ $port =~ ^[0-9]+$ ]] && [ "$port" -ge 1024 ] && [ "$port" -le 65535 ] ||
  fail "free_port printed '$port', not a port number"
python3 -c 'import socket, sys; s = socket.socket(); s.bind(("", int(sys.argv[1]))); s.listen()' \
  "$port" || fail "port $port from free_port could not be bound"
echo "free_port: $port, bound"

if ! python3 -c 'import torch' 2>/dev/null; then
  echo "SKIPPING the anchor cases: torch is not importable here (tools/setup installs it)"
  exit 0
fi
data=/usr/share/datasets/fashion-mnist
if [ ! -f "$data/train-images-idx3-ubyte.gz" ]; then
  echo "SKIPPING the anchor cases: no Fashion-MNIST in $data (tools/setup fetches it)"
  exit 0
fi

export TMPDIR=${TEST_TMPDIR:-/tmp}
run() {  # run CASE ENV...: the benchmark with tiny sizes; output in $TMPDIR/CASE.out, status in `status`
  local name=$1
  shift
  status=0
  env NPROC=2 HIDDEN=32 BATCH=16 ROUNDS=1 STEPS=6 WARMUP=1 OUT="$TMPDIR/$name" "$@" "$script" \
    >"$TMPDIR/$name.out" 2>&1 || status=$?
  echo "--- $name: exit $status"
  cat "$TMPDIR/$name.out"
}
result_of() { tail -1 "$TMPDIR/$1.out"; }

run retried DDPX_BENCH_BREAK_ANCHOR=first
[ "$status" = 0 ] || fail "retried: exit $status"
grep -q "^anchor retry: torch round 1" "$TMPDIR/retried.out" || fail "retried: no retry printed"
grep -q "ddpx_bench_broken_on_purpose" "$TMPDIR/retried/torch_1.attempt1.log" ||
  fail "retried: the first attempt did not fail on the refused flag"
line=$(result_of retried)
[[ $line =~ ^RESULT\ .*\ step_vs_torch=[0-9.]+\  ]] || fail "retried: no ratio in '$line'"
[[ $line == *" anchor_retries=1 anchor_failures=0 "* ]] || fail "retried: counts wrong in '$line'"

run failed_twice DDPX_BENCH_BREAK_ANCHOR=always NPROC=1  # one rank: half the torch imports
[ "$status" = 0 ] || fail "failed_twice: exit $status (the RESULT line is the outcome)"
grep -q "^anchor failed twice: torch round 1" "$TMPDIR/failed_twice.out" ||
  fail "failed_twice: the second failure was not printed"
line=$(result_of failed_twice)
[[ $line =~ ^RESULT\ ddpx_step_ms=[0-9.]+\ torch_step_ms=-\ step_vs_torch=-\  ]] ||
  fail "failed_twice: expected ddpx's figure and '-' for torch in '$line'"
[[ $line == *" anchor_retries=1 anchor_failures=1 "* ]] || fail "failed_twice: counts wrong in '$line'"

# Copies at once (torch_step_vs_python.sh's one-rank floor jobs): a failure
# reruns every copy, so the retried copies still share the machine.
(
  OUT=$TMPDIR/copies
  mkdir -p "$OUT"
  . "$runfiles/examples/benchmarks/bench_env.sh"
  launch=$(built_binary examples/launcher/launch) || fail "copies: no launcher in the runfiles"
  DDPX_BENCH_BREAK_ANCHOR=first run_anchor --copies=2 "one-rank jobs" "$OUT/alone" \
    "$launch" --nproc=1 -- python3 "$runfiles/examples/reference/train_torch.py" --nproc=0 \
    --hidden=32 --batch_size=16 --max_steps=3 --log_every=1000 >"$OUT.out" 2>&1 ||
    { cat "$OUT.out"; fail "copies: the retry failed"; }
  cat "$OUT.out"
  [ "$(grep -c '^anchor failed: one-rank jobs, attempt 1' "$OUT.out")" = 2 ] ||
    fail "copies: expected both copies' first failures printed"
  grep -q '^anchor retry: one-rank jobs' "$OUT.out" || fail "copies: no retry printed"
  for k in 1 2; do
    grep -q '"type": "step"' "$OUT/alone_$k.jsonl" || fail "copies: copy $k has no steps"
  done
  [ "$(cat "$OUT/anchor_events")" = "retry one-rank jobs" ] || fail "copies: events $(cat "$OUT/anchor_events")"
)

run ddpx_fails HOOK=no_such_hook
[ "$status" != 0 ] || fail "ddpx_fails: exit 0 although ddpx failed"
grep -q "ddpx failed" "$TMPDIR/ddpx_fails.out" || fail "ddpx_fails: does not say ddpx failed"
! grep -q "^RESULT" "$TMPDIR/ddpx_fails.out" || fail "ddpx_fails: printed a RESULT line"
echo PASS
