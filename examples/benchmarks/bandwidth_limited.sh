#!/usr/bin/env bash
# Compression hooks where the network is the bottleneck: 4 ranks of
# examples/train inside a network namespace whose loopback is rate-limited
# with tc's token bucket filter (all ranks share the one link, as hosts
# behind one switch uplink would).
#
#   sudo examples/benchmarks/bandwidth_limited.sh            # 1gbit, 100 steps
#   RATE=500mbit STEPS=300 HOOKS="allreduce fp16" sudo -E examples/benchmarks/bandwidth_limited.sh
#
# Per hook it prints the median step time, the communication time per step
# and its speedup over allreduce. Communication time per step is the larger
# of two lower bounds: (median step time with the hook - median step time
# with the `noop` hook, which has the same compute and no communication: the
# anchor measured in the same run) and the median time DDP's finalize spent
# blocked on communication (comm_wait_s). The first alone is noise-bound once
# communication is nearly free (PowerSGD), the second alone misses the cost
# of communication overlapped with backward. Last line: RESULT key=value ... The namespace is removed on exit, also on
# failure or Ctrl-C. Environment: RATE (1gbit), NPROC (4), STEPS (100),
# EPOCHS (1; with STEPS=-1 trains full epochs), HIDDEN (2048,2048),
# BATCH (64 per rank), HOOKS, TRAIN (the trainer binary), OUT (metrics dir),
# REUSE=1 (keep the runs whose metrics already exist in OUT), EXTRA (more
# trainer flags, e.g. "--bucket_cap_mb=100 --first_bucket_cap_mb=100").
set -euo pipefail

RATE=${RATE:-1gbit}
NPROC=${NPROC:-4}
STEPS=${STEPS:-100}
EPOCHS=${EPOCHS:-1}
HIDDEN=${HIDDEN:-2048,2048}
BATCH=${BATCH:-64}
# PowerSGD compresses from step 10 on (error feedback needs start_iter >= 2;
# torch's default of 1000 would make a short run pure allreduce).
HOOKS=${HOOKS:-"noop allreduce fp16 int8 powersgd:rank=2,start_iter=10"}
SKIP=${SKIP:-12}  # steps left out of the medians: warm-up, bucket rebuild, PowerSGD start

die() { echo "bandwidth_limited: $*" >&2; exit 1; }
[ "$(id -u)" = 0 ] || die "needs root (ip netns, tc); run with sudo"
command -v tc >/dev/null || die "tc not found (apt-get install iproute2)"

here=$(cd "$(dirname "$0")" && pwd)
if [ -z "${TRAIN:-}" ]; then
  for t in "${RUNFILES_DIR:-/nonexistent}/ddpx/examples/train" "$here/../../.bazel/bin/examples/train"; do
    [ -x "$t" ] && TRAIN=$t && break
  done
fi
[ -x "${TRAIN:-}" ] || die "trainer not found; bazel build //examples:train or set TRAIN=/path/to/train"
OUT=${OUT:-$(mktemp -d /tmp/bandwidth_limited.XXXXXX)}
mkdir -p "$OUT"

NS=ddpx_bw_$$
cleanup() { ip netns del "$NS" 2>/dev/null || true; }
trap cleanup EXIT
trap 'exit 130' INT TERM
ip netns add "$NS"
ip netns exec "$NS" ip link set lo up
ip netns exec "$NS" tc qdisc add dev lo root tbf rate "$RATE" burst 1mb latency 100ms
echo "namespace $NS: lo limited to $RATE; $NPROC ranks, MLP 784-$HIDDEN-10, batch $BATCH/rank," \
     "steps $STEPS, epochs $EPOCHS; metrics in $OUT"

summarize() {  # metrics.jsonl -> "median_step comm_wait bytes ratio test_acc"
  python3 - "$1" "$SKIP" <<'PY'
import json, statistics, sys
steps, acc = [], None
for line in open(sys.argv[1]):
    r = json.loads(line)
    if r["type"] == "step" and r["step"] > int(sys.argv[2]):
        steps.append(r)
    elif r["type"] == "epoch":
        acc = r["test_acc"]
if not steps:
    sys.exit("no steps after the warm-up; raise STEPS")
med = lambda k: statistics.median(s[k] for s in steps)
print(med("step_time_s"), med("comm_wait_s"), med("bytes_sent"), med("compression_ratio"), acc)
PY
}

declare -A step_time wait bytes ratio acc
for hook in $HOOKS; do
  name=${hook%%:*}
  [[ $hook == powersgd:rank=* ]] && name=powersgd${hook#powersgd:rank=} && name=${name%%,*}
  metrics="$OUT/$name.jsonl"
  echo "== $hook"
  if [ "${REUSE:-0}" = 1 ] && [ -s "$metrics" ]; then
    echo "(reusing $metrics)"
  else
    rm -f "$metrics"
    if ! ip netns exec "$NS" "$TRAIN" --nproc="$NPROC" --hook="$hook" --hidden="$HIDDEN" \
        --batch_size="$BATCH" --epochs="$EPOCHS" --max_steps="$STEPS" --log_every=20 \
        --metrics_out="$metrics" --timeout_s=600 ${EXTRA:-} >"$OUT/$name.log" 2>&1; then
      tail -20 "$OUT/$name.log"
      die "the run with --hook=$hook failed (log: $OUT/$name.log)"
    fi
  fi
  grep -E "^(epoch [0-9]+[ :(]|done)" "$OUT/$name.log" | tail -2
  read -r step_time[$name] wait[$name] bytes[$name] ratio[$name] acc[$name] < <(summarize "$metrics")
done

[ -n "${step_time[noop]:-}" ] || die "the noop anchor is needed for communication time"
[ -n "${step_time[allreduce]:-}" ] || die "the allreduce anchor is needed for speedups"
comm() { python3 -c "print(max(0.001, $1 - ${step_time[noop]}, $2))"; }
ar_comm=$(comm "${step_time[allreduce]}" "${wait[allreduce]}")
printf "\n%-12s %12s %12s %12s %14s %10s %12s %9s\n" hook "step (ms)" "comm (ms)" \
  "comm speedup" "sent/step" ratio "wait (ms)" "test acc"
result="RESULT"
for hook in $HOOKS; do
  name=${hook%%:*}
  [[ $hook == powersgd:rank=* ]] && name=powersgd${hook#powersgd:rank=} && name=${name%%,*}
  c=$(comm "${step_time[$name]}" "${wait[$name]}")
  speedup=$(python3 -c "print(f'{$ar_comm / $c:.2f}')")
  [ "$name" = noop ] && speedup=-
  printf "%-12s %12.1f %12.1f %12s %14.0f %10.1f %12.1f %9.4f\n" "$name" \
    "$(python3 -c "print(1000*${step_time[$name]})")" "$(python3 -c "print(1000*$c)")" "$speedup" \
    "${bytes[$name]}" "${ratio[$name]}" "$(python3 -c "print(1000*${wait[$name]})")" "${acc[$name]}"
  if [ "$name" != noop ]; then
    [ "$name" != allreduce ] && result+=" ${name}_comm_speedup=$speedup"
    result+=" ${name}_step_speedup=$(python3 -c "print(f'{${step_time[allreduce]} / ${step_time[$name]}:.2f}')")"
    result+=" ${name}_test_acc=${acc[$name]}"
  fi
done
echo
echo "$result rate=$RATE nproc=$NPROC steps=$STEPS${EXTRA:+ extra='$EXTRA'}"
