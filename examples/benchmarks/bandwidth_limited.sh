#!/usr/bin/env bash
# Compression hooks where the network is the bottleneck: NPROC (4) ranks of
# examples/train, one rank per virtual host of tools/virtual_cluster (each
# host its own network, UTS and IPC namespaces and /dev/shm, so ddpx's host
# identity differs per rank: no shared memory, no two-level path), every
# host joined to one bridge by its own veth link limited with tc's token
# bucket filter to RATE in both directions: as hosts behind one switch.
# Every byte between ranks crosses two limited links (the sender's uplink,
# the receiver's downlink) over TCP; the script checks it from the links'
# byte counters and stops if a run's traffic went around them.
#
#   sudo examples/benchmarks/bandwidth_limited.sh            # 1gbit, 100 steps
#   RATE=500mbit STEPS=300 HOOKS="allreduce fp16" sudo -E examples/benchmarks/bandwidth_limited.sh
#
# Per hook it prints the median step time and three measures of
# communication time per step, each with its speedup over allreduce, and
# the bytes per step through the busiest host uplink. All ranks stamp their
# operations on the machine's CLOCK_MONOTONIC (--comm_trace; the virtual
# hosts share it), and an operation involving every rank cannot start
# before the LAST rank arrives, so each operation costs (latest completion -
# latest arrival) over the ranks; per step the intervals are merged and
# summed (comm_time.py):
#
# - transfer (the headline, RESULT's <hook>_comm_speedup): per collective
#   that DDP and the hook issue (examples/trainer/timed_backend.h): the
#   network's time proper, without waiting for a straggler (which matters
#   with 4 ranks time-sharing 2 cores).
# - hook (<hook>_hook_speedup): per bucket, from entering the communication
#   hook to its future completing (examples/trainer/timed_hook.h): adds the
#   hook's compression math (casts, quantization, PowerSGD's GEMMs and
#   orthogonalization) around its collectives.
# - bound (<hook>_comm_speedup_old): the larger of two lower bounds, (median
#   step time with the hook - median step time with the `noop` hook, same
#   compute and no communication, the anchor of the same run) and the median
#   time DDP's finalize blocked on communication (comm_wait_s), which
#   includes waiting for the slowest rank.
# - link MB and wire: the busiest host uplink's bytes per step, from the
#   links' counters between step SKIP and the end, and their time at RATE.
# - cpu: with FLOOR=1 (the default) every hook runs again with the links at
#   FLOOR_RATE (100gbit), where the wire costs next to nothing: its
#   transfer there is its CPU-bound time (4 ranks share 2 cores). A hook's
#   transfer at RATE cannot be under its wire or its cpu time, so
#   <hook>_floor_speedup = allreduce's transfer / max(wire, cpu) is the
#   most its speedup can be on this machine.
#
# Last line: RESULT key=value ... The virtual hosts are removed on exit,
# also on failure or Ctrl-C. Environment: RATE (1gbit), NPROC (4: hosts,
# one rank each), STEPS (100), EPOCHS (1; with STEPS=-1 trains full epochs),
# HIDDEN (2048,2048), BATCH (64 per rank), BLAS_THREADS (1 OpenBLAS thread
# per rank: the hosts share this machine's cores), BUCKET_MB (100: DDP's
# bucket cap and first-bucket cap for every hook, so the 23 MB model is one
# bucket; "25,1" gives DDP's defaults), HOOKS, TRAIN (the trainer binary),
# OUT (metrics dir), REUSE=1 (keep the runs whose metrics already exist in
# OUT), EXTRA (more trainer flags), FLOOR (1), FLOOR_RATE (100gbit).
set -euo pipefail

RATE=${RATE:-1gbit}
NPROC=${NPROC:-4}
STEPS=${STEPS:-100}
EPOCHS=${EPOCHS:-1}
HIDDEN=${HIDDEN:-2048,2048}
BATCH=${BATCH:-64}
BLAS_THREADS=${BLAS_THREADS:-1}
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
FLOOR=${FLOOR:-1}
FLOOR_RATE=${FLOOR_RATE:-100gbit}

die() { echo "bandwidth_limited: $*" >&2; exit 1; }
[ "$(id -u)" = 0 ] || die "needs root (tools/virtual_cluster makes namespaces); run with sudo"

. "$(dirname "$0")/trainer.sh" 2>/dev/null ||
  . "$0.runfiles/ddpx/examples/benchmarks/trainer.sh"  # here, workspace, TRAIN
# Beside this script in the source tree, in the runfiles under `bazel run`.
comm_time=$here/comm_time.py
[ -f "$comm_time" ] || comm_time=$0.runfiles/ddpx/examples/benchmarks/comm_time.py
[ -f "$comm_time" ] || die "comm_time.py not found next to $0 or in its runfiles"
vc=$workspace/tools/virtual_cluster
[ -x "$vc" ] || die "tools/virtual_cluster not found under $workspace"
free_port=$(built_binary examples/benchmarks/free_port) ||
  die "free_port not found; bazel build //examples/benchmarks:free_port"
OUT=${OUT:-$(mktemp -d /tmp/bandwidth_limited.XXXXXX)}
mkdir -p "$OUT"

NAME=bw
trap '"$vc" down --name=$NAME >/dev/null 2>&1 || true' EXIT
trap 'exit 130' INT TERM
"$vc" down --name=$NAME >/dev/null 2>&1 || true  # a cluster left by a killed run
"$vc" up --hosts="$NPROC" --rate="$RATE" --name=$NAME >/dev/null
echo "virtual cluster '$NAME': $NPROC hosts, one rank each, TCP over veth links limited to $RATE" \
     "both ways; MLP 784-$HIDDEN-10, batch $BATCH/rank, $BLAS_THREADS BLAS thread(s)/rank," \
     "buckets ${bucket_cap}/${first_bucket_cap} MiB, steps $STEPS, epochs $EPOCHS; metrics in $OUT;" \
     "load average $(cut -d' ' -f1-3 /proc/loadavg)"

tx_bytes() { "$vc" status --name=$NAME | awk 'NR > 1 { printf "%s ", $3 }'; }

# The links' byte counters once rank 0 has finished SKIP steps, with the
# step it had reached: "STEP COUNTER..." in $1 (the metrics file is flushed
# every step). So the bytes per step leave out start-up and the steps before
# PowerSGD compresses.
sample_after_skip() {  # sample_after_skip OUTFILE METRICS
  local step=0
  while [ "$step" -lt "$SKIP" ]; do
    sleep 0.05
    step=$(tail -n 1 "$2" 2>/dev/null | sed -n 's/.*"step":\([0-9]*\),.*/\1/p') || true
    step=${step:-0}
  done
  echo "$step $(tx_bytes)" >"$1"
}

run_hook() {  # run_hook HOOK NAME: one job, rank r on host r+1; output to $OUT/NAME.rankR.log
  local hook=$1 name=$2 port r pids=() sampler
  rm -f "$OUT/$name.jsonl" "$OUT/$name.trace".rank* "$OUT/$name.links"*
  # The store's host binds the port: chosen free there, handed to every rank.
  port=$("$vc" run "$NAME-h1" -- "$free_port") || die "no free port on $NAME-h1"
  sample_after_skip "$OUT/$name.links_mid" "$OUT/$name.jsonl" &
  sampler=$!
  for r in $(seq 0 $((NPROC - 1))); do
    local metrics=()
    [ "$r" = 0 ] && metrics=(--metrics_out="$OUT/$name.jsonl")
    "$vc" run "$NAME-h$((r + 1))" -- env MASTER_ADDR=10.213.0.1 MASTER_PORT="$port" \
      RANK="$r" WORLD_SIZE="$NPROC" LOCAL_RANK=0 LOCAL_WORLD_SIZE=1 \
      "$TRAIN" --init=env:// --iface=eth0 --job_id="bw_${name}_$$" --hook="$hook" \
      --hidden="$HIDDEN" --batch_size="$BATCH" --threads="$BLAS_THREADS" \
      --epochs="$EPOCHS" --max_steps="$STEPS" --log_every=20 --comm_trace="$OUT/$name.trace" \
      --timeout_s=600 --bucket_cap_mb="$bucket_cap" --first_bucket_cap_mb="$first_bucket_cap" \
      "${metrics[@]}" ${EXTRA:-} >"$OUT/$name.rank$r.log" 2>&1 &
    pids+=($!)
  done
  for r in "${!pids[@]}"; do
    wait "${pids[$r]}" || {
      kill "$sampler" 2>/dev/null || true
      tail -20 "$OUT/$name.rank$r.log"
      die "the run with --hook=$hook failed on rank $r (log: $OUT/$name.rank$r.log)"
    }
  done
  kill "$sampler" 2>/dev/null || true
  wait "$sampler" 2>/dev/null || true
  [ -s "$OUT/$name.links_mid" ] || die "--hook=$hook: rank 0 never reported step $SKIP (SKIP)"
  echo "$(cat "$OUT/$name.links_mid") $(tx_bytes)" >"$OUT/$name.links"  # STEP, NPROC counters then, NPROC at the end
}

name_of() {  # name_of HOOK: the run's name (powersgd:rank=2,... -> powersgd2)
  local name=${1%%:*}
  [[ $1 == powersgd:rank=* ]] && name=powersgd${1#powersgd:rank=} && name=${name%%,*}
  echo "$name"
}

# link_per_step NAME SENT: the busiest host uplink's bytes per step after
# SKIP; fails if the hook's payload (SENT bytes per rank per step) did not
# cross the links, as with shared memory or loopback between the ranks.
link_per_step() {
  python3 - "$NPROC" "$STEPS" "$2" $(cat "$OUT/$1.links") <<'PY'
import sys
n, steps, sent = int(sys.argv[1]), int(sys.argv[2]), float(sys.argv[3])
mid_step, c = int(sys.argv[4]), [int(x) for x in sys.argv[5:]]
up = [b - a for a, b in zip(c[:n], c[n:])]
timed = steps - mid_step  # 0 if the sample came at the end (a short run): then it fails below
if steps > 0 and sum(up) < timed * sent:
    sys.exit(f"the links carried {sum(up)} bytes in the last {timed} steps, less than one rank's "
             f"{sent:.0f} bytes per step: the ranks reached each other around the limited links "
             "(shared memory or loopback: do they see one host?)")
if timed <= 0:
    sys.exit(f"the counters were read after the last step ({mid_step}); raise STEPS")
print(max(up) / timed)
PY
}

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

reusing() {  # reusing NAME: whether REUSE=1 keeps the run NAME already in OUT
  [ "${REUSE:-0}" = 1 ] && [ -s "$OUT/$1.jsonl" ] && [ -s "$OUT/$1.links" ] && echo "(reusing $OUT/$1.*)"
}

declare -A step_time wait bytes ratio acc transfer hook_time ncoll link cpu
for hook in $HOOKS; do
  name=$(name_of "$hook")
  echo "== $hook"
  reusing "$name" || run_hook "$hook" "$name"
  grep -E "^(epoch [0-9]+[ :(]|done)" "$OUT/$name.rank0.log" | tail -2
  read -r step_time[$name] wait[$name] bytes[$name] ratio[$name] acc[$name] < <(summarize "$OUT/$name.jsonl")
  read -r transfer[$name] hook_time[$name] ncoll[$name] < \
    <(python3 "$comm_time" "$OUT/$name.trace" "$NPROC" "$SKIP")
  link[$name]=$(link_per_step "$name" "${bytes[$name]}") ||
    die "--hook=$hook: traffic did not cross the limited links"
done

# Each hook's CPU-bound transfer time: the same runs with links FLOOR_RATE
# fast, where the wire costs next to nothing. At RATE a hook's transfer
# cannot be under this nor under its bytes' wire time; the larger of the two
# over allreduce's transfer is the best speedup this machine allows it
# (<hook>_floor_speedup).
if [ "$FLOOR" = 1 ]; then
  "$vc" down --name=$NAME >/dev/null 2>&1 || true
  "$vc" up --hosts="$NPROC" --rate="$FLOOR_RATE" --name=$NAME >/dev/null
  for hook in $HOOKS; do
    name=$(name_of "$hook")
    [ "$name" = noop ] && continue
    echo "== $hook, links at $FLOOR_RATE"
    reusing "floor_$name" || run_hook "$hook" "floor_$name"
    read -r cpu[$name] _ _ < <(python3 "$comm_time" "$OUT/floor_$name.trace" "$NPROC" "$SKIP")
  done
fi

[ -n "${step_time[noop]:-}" ] || die "the noop anchor is needed for communication time"
[ -n "${step_time[allreduce]:-}" ] || die "the allreduce anchor is needed for speedups"
comm() { python3 -c "print(max(0.001, $1 - ${step_time[noop]}, $2))"; }
ms() { python3 -c "print(1000 * $1)"; }
ratio_of() { python3 -c "print(f'{$1 / max($2, 1e-6):.2f}')"; }
ar_comm=$(comm "${step_time[allreduce]}" "${wait[allreduce]}")
wire_ms() {  # wire_ms BYTES: the time BYTES take on one link at RATE (tc's [kmg]bit), or -
  python3 - "$1" "$RATE" <<'PY'
import re, sys
m = re.fullmatch(r"([0-9.]+)([kmg]?)bit", sys.argv[2])
print("-" if not m else
      f"{8e3 * float(sys.argv[1]) / (float(m.group(1)) * {'': 1, 'k': 1e3, 'm': 1e6, 'g': 1e9}[m.group(2)]):.1f}")
PY
}
floor_speedup() {  # floor_speedup WIRE_MS CPU_S: allreduce's transfer / max(wire, CPU-bound time)
  python3 -c "w, c = '$1', '$2'; f = max(float(w) if w != '-' else 0, 1e3 * float(c) if c else 0)
print(f'{1e3 * ${transfer[allreduce]} / f:.2f}' if f > 0 else '-')"
}
printf "\n%-10s %8s %9s %7s %8s %7s %8s %7s %5s %10s %6s %8s %7s %7s %7s %6s\n" hook "step ms" \
  "transfer" speedup "hook ms" speedup "bound" speedup colls "sent/step" ratio "test acc" \
  "link MB" "wire ms" "cpu ms" floor
result="RESULT"
for hook in $HOOKS; do
  name=$(name_of "$hook")
  c=$(comm "${step_time[$name]}" "${wait[$name]}")
  speedup_old=$(ratio_of "$ar_comm" "$c")
  speedup=$(ratio_of "${transfer[allreduce]}" "${transfer[$name]}")
  speedup_hook=$(ratio_of "${hook_time[allreduce]}" "${hook_time[$name]}")
  wire=$(wire_ms "${link[$name]}")
  cpu_ms=- floor=-
  if [ -n "${cpu[$name]:-}" ]; then
    cpu_ms=$(python3 -c "print(f'{1000 * ${cpu[$name]}:.1f}')")
    floor=$(floor_speedup "$wire" "${cpu[$name]}")
  fi
  [ "$name" = noop ] && speedup=- && speedup_old=- && speedup_hook=-
  printf "%-10s %8.1f %9.1f %7s %8.1f %7s %8.1f %7s %5s %10.0f %6.1f %8.4f %7.2f %7s %7s %6s\n" \
    "$name" "$(ms "${step_time[$name]}")" "$(ms "${transfer[$name]}")" "$speedup" \
    "$(ms "${hook_time[$name]}")" "$speedup_hook" "$(ms "$c")" "$speedup_old" \
    "${ncoll[$name]}" "${bytes[$name]}" "${ratio[$name]}" "${acc[$name]}" \
    "$(python3 -c "print(${link[$name]} / 1e6)")" "$wire" "$cpu_ms" "$floor"
  if [ "$name" != noop ]; then
    [ "$name" != allreduce ] && result+=" ${name}_comm_speedup=$speedup ${name}_hook_speedup=$speedup_hook ${name}_comm_speedup_old=$speedup_old"
    [ "$name" != allreduce ] && [ "$floor" != - ] && result+=" ${name}_floor_speedup=$floor"
    result+=" ${name}_transfer_ms=$(python3 -c "print(f'{1000 * ${transfer[$name]}:.1f}')")"
    result+=" ${name}_step_speedup=$(ratio_of "${step_time[allreduce]}" "${step_time[$name]}")"
    result+=" ${name}_test_acc=${acc[$name]}"
  fi
done
echo
echo "transfer, hook, bound: ms per step (this script's header); link MB: the busiest host uplink's" \
     "bytes per step after step $SKIP; wire ms: their time at $RATE; cpu ms: the transfer with" \
     "links at $FLOOR_RATE; floor: allreduce's transfer / max(wire, cpu), the best speedup here"
echo "$result links=veth_tcp rate=$RATE nproc=$NPROC steps=$STEPS bucket_mb=$bucket_cap,$first_bucket_cap load=$(cut -d' ' -f1 /proc/loadavg)${EXTRA:+ extra='$EXTRA'}"
