#!/usr/bin/env bash
# Compression hooks where the network is the bottleneck: 4 ranks of
# examples/train inside a network namespace whose loopback is rate-limited
# with tc's token bucket filter (all ranks share the one link, as hosts
# behind one switch uplink would).
#
#   sudo examples/benchmarks/bandwidth_limited.sh            # 1gbit, 100 steps
#   RATE=500mbit STEPS=300 HOOKS="allreduce fp16" sudo -E examples/benchmarks/bandwidth_limited.sh
#
# Per hook it prints the median step time and three measures of
# communication time per step, each with its speedup over allreduce. All
# ranks stamp their operations on the host's CLOCK_MONOTONIC (--comm_trace),
# and an operation involving every rank cannot start before the LAST rank
# arrives, so each operation costs (latest completion - latest arrival) over
# the ranks; per step the intervals are merged and summed (comm_time.py):
#
# - transfer (the headline, RESULT's <hook>_comm_speedup): per collective
#   that DDP and the hook issue (examples/trainer/timed_backend.h): the
#   network's time proper, without waiting for a straggler (which matters
#   with 4 ranks time-sharing 2 cores).
# - hook (<hook>_hook_speedup): per bucket, from entering the communication
#   hook to its future completing (examples/trainer/timed_hook.h): adds the
#   hook's compression math (casts, quantization, PowerSGD's GEMMs and
#   orthogonalization) around its collectives.
# - bound (the previous measure, <hook>_comm_speedup_old): the larger of two
#   lower bounds, (median step time with the hook - median step time with the
#   `noop` hook, same compute and no communication, the anchor of the same
#   run) and the median time DDP's finalize blocked on communication
#   (comm_wait_s), which includes waiting for the slowest rank.
#
# Last line: RESULT key=value ... The namespace is removed on exit, also on
# failure or Ctrl-C. Environment: RATE (1gbit), NPROC (4), STEPS (100),
# EPOCHS (1; with STEPS=-1 trains full epochs), HIDDEN (2048,2048),
# BATCH (64 per rank), BUCKET_MB (100: DDP's bucket cap and first-bucket cap
# for every hook, so the 23 MB model is one bucket; "25,1" gives DDP's
# defaults), HOOKS, TRAIN (the trainer binary), OUT (metrics dir),
# REUSE=1 (keep the runs whose metrics already exist in OUT), EXTRA (more
# trainer flags, e.g. "--blas_threads=1").
set -euo pipefail

RATE=${RATE:-1gbit}
NPROC=${NPROC:-4}
STEPS=${STEPS:-100}
EPOCHS=${EPOCHS:-1}
HIDDEN=${HIDDEN:-2048,2048}
BATCH=${BATCH:-64}
# One bucket for every hook: at 1 Gbit/s overlapping the first (1 MiB)
# bucket with backward buys allreduce nothing, while each extra bucket costs
# PowerSGD three more latency-bound collectives (rank-1 tensors, P, Q).
BUCKET_MB=${BUCKET_MB:-100}
bucket_cap=${BUCKET_MB%%,*}
first_bucket_cap=${BUCKET_MB#*,}
# PowerSGD compresses from step 10 on (error feedback needs start_iter >= 2;
# torch's default of 1000 would make a short run pure allreduce).
HOOKS=${HOOKS:-"noop allreduce fp16 int8 powersgd:rank=2,start_iter=10"}
SKIP=${SKIP:-12}  # steps left out of the medians: warm-up, bucket rebuild, PowerSGD start

die() { echo "bandwidth_limited: $*" >&2; exit 1; }
[ "$(id -u)" = 0 ] || die "needs root (ip netns, tc); run with sudo"
command -v tc >/dev/null || die "tc not found (apt-get install iproute2)"

. "$(dirname "$0")/trainer.sh" 2>/dev/null ||
  . "$0.runfiles/ddpx/examples/benchmarks/trainer.sh"  # here, workspace, TRAIN
# Beside this script in the source tree, in the runfiles under `bazel run`.
comm_time=$here/comm_time.py
[ -f "$comm_time" ] || comm_time=$0.runfiles/ddpx/examples/benchmarks/comm_time.py
[ -f "$comm_time" ] || die "comm_time.py not found next to $0 or in its runfiles"
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
     "buckets ${bucket_cap}/${first_bucket_cap} MiB, steps $STEPS, epochs $EPOCHS; metrics in $OUT;" \
     "load average $(cut -d' ' -f1-3 /proc/loadavg)"

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

declare -A step_time wait bytes ratio acc transfer hook_time ncoll
for hook in $HOOKS; do
  name=${hook%%:*}
  [[ $hook == powersgd:rank=* ]] && name=powersgd${hook#powersgd:rank=} && name=${name%%,*}
  metrics="$OUT/$name.jsonl"
  echo "== $hook"
  if [ "${REUSE:-0}" = 1 ] && [ -s "$metrics" ]; then
    echo "(reusing $metrics)"
  else
    rm -f "$metrics" "$OUT/$name.trace".rank*
    if ! ip netns exec "$NS" "$TRAIN" --nproc="$NPROC" --hook="$hook" --hidden="$HIDDEN" \
        --batch_size="$BATCH" --epochs="$EPOCHS" --max_steps="$STEPS" --log_every=20 \
        --metrics_out="$metrics" --comm_trace="$OUT/$name.trace" --timeout_s=600 \
        --bucket_cap_mb="$bucket_cap" --first_bucket_cap_mb="$first_bucket_cap" ${EXTRA:-} >"$OUT/$name.log" 2>&1; then
      tail -20 "$OUT/$name.log"
      die "the run with --hook=$hook failed (log: $OUT/$name.log)"
    fi
  fi
  grep -E "^(epoch [0-9]+[ :(]|done)" "$OUT/$name.log" | tail -2
  read -r step_time[$name] wait[$name] bytes[$name] ratio[$name] acc[$name] < <(summarize "$metrics")
  read -r transfer[$name] hook_time[$name] ncoll[$name] < \
    <(python3 "$comm_time" "$OUT/$name.trace" "$NPROC" "$SKIP")
done

[ -n "${step_time[noop]:-}" ] || die "the noop anchor is needed for communication time"
[ -n "${step_time[allreduce]:-}" ] || die "the allreduce anchor is needed for speedups"
comm() { python3 -c "print(max(0.001, $1 - ${step_time[noop]}, $2))"; }
ms() { python3 -c "print(1000 * $1)"; }
ratio_of() { python3 -c "print(f'{$1 / max($2, 1e-6):.2f}')"; }
ar_comm=$(comm "${step_time[allreduce]}" "${wait[allreduce]}")
printf "\n%-12s %9s %14s %7s %10s %7s %11s %7s %6s %12s %7s %9s\n" hook "step (ms)" \
  "transfer (ms)" speedup "hook (ms)" speedup "bound (ms)" speedup "colls" "sent/step" \
  ratio "test acc"
result="RESULT"
for hook in $HOOKS; do
  name=${hook%%:*}
  [[ $hook == powersgd:rank=* ]] && name=powersgd${hook#powersgd:rank=} && name=${name%%,*}
  c=$(comm "${step_time[$name]}" "${wait[$name]}")
  speedup_old=$(ratio_of "$ar_comm" "$c")
  speedup=$(ratio_of "${transfer[allreduce]}" "${transfer[$name]}")
  speedup_hook=$(ratio_of "${hook_time[allreduce]}" "${hook_time[$name]}")
  [ "$name" = noop ] && speedup=- && speedup_old=- && speedup_hook=-
  printf "%-12s %9.1f %14.1f %7s %10.1f %7s %11.1f %7s %6s %12.0f %7.1f %9.4f\n" "$name" \
    "$(ms "${step_time[$name]}")" "$(ms "${transfer[$name]}")" "$speedup" \
    "$(ms "${hook_time[$name]}")" "$speedup_hook" "$(ms "$c")" "$speedup_old" \
    "${ncoll[$name]}" "${bytes[$name]}" "${ratio[$name]}" "${acc[$name]}"
  if [ "$name" != noop ]; then
    [ "$name" != allreduce ] && result+=" ${name}_comm_speedup=$speedup ${name}_hook_speedup=$speedup_hook ${name}_comm_speedup_old=$speedup_old"
    result+=" ${name}_transfer_ms=$(python3 -c "print(f'{1000 * ${transfer[$name]}:.1f}')")"
    result+=" ${name}_step_speedup=$(ratio_of "${step_time[allreduce]}" "${step_time[$name]}")"
    result+=" ${name}_test_acc=${acc[$name]}"
  fi
done
echo
echo "$result rate=$RATE nproc=$NPROC steps=$STEPS bucket_mb=$bucket_cap,$first_bucket_cap load=$(cut -d' ' -f1 /proc/loadavg)${EXTRA:+ extra='$EXTRA'}"
