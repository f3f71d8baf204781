#!/usr/bin/env bash
# Step time of //examples:train with the shared-memory path (the default for
# ranks on one host) against the same run with DDPX_SHM=0 (loopback TCP):
# same model, hyperparameters, ranks and batch. The two run alternately,
# ROUNDS times STEPS steps each; medians over every step after WARMUP.
#
#   bazel run //examples/benchmarks:step_shm
#   NPROC=4 ROUNDS=2 examples/benchmarks/step_shm.sh
#
# Then the hooks on one host: COMM_NPROC ranks, one 100 MiB bucket
# (`--nproc=4 --max_steps=60 --bucket_cap_mb=100`), the allreduce hook,
# flat int8 and hierarchical int8 with the whole host as its one group,
# alternately, ROUNDS times each; their communication time per step is the
# median over the steps after WARMUP of the time DDP's finalize waited for
# the bucket (the metrics' comm_wait_s, the trainer's "comm wait" figure).
# Every collective of these hooks takes the shared-memory path
# (docs/gloo.md, "Execution plan").
#
# Both sides are ddpx (no anchor to retry): a failed run ends the script
# with "ddpx failed" and a non-zero status, without a RESULT line.
# Last line: RESULT shm_step_ms=... tcp_step_ms=... step_tcp_vs_shm=<tcp/shm>
#   allreduce_comm_ms_one_host=... int8_comm_ms_one_host=...
#   hier_int8_comm_ms_one_host=... int8_comm_vs_allreduce_one_host=...
#   hier_int8_comm_vs_allreduce_one_host=... load=...
# Environment: TRAIN, NPROC (2), HIDDEN (2048,2048), BATCH (64), HOOK
# (allreduce), ROUNDS (3), STEPS (150), WARMUP (10), COMM_NPROC (4),
# COMM_STEPS (60), OUT.
set -euo pipefail

die() { echo "step_shm: $*" >&2; exit 1; }
. "$(dirname "$0")/trainer.sh" 2>/dev/null ||
  . "$0.runfiles/ddpx/examples/benchmarks/trainer.sh"  # here, workspace, TRAIN
step_time_setup 150
OUT=${OUT:-$(mktemp -d /tmp/step_shm.XXXXXX)}
mkdir -p "$OUT"

echo "step_shm: MLP 784-$HIDDEN-10, $NPROC ranks x batch $BATCH, hook $HOOK," \
     "$ROUNDS rounds x $STEPS steps each; load average $(cut -d' ' -f1-3 /proc/loadavg)"
for round in $(seq 1 "$ROUNDS"); do
  for path in shm tcp; do
    echo "== round $round: $path (load $(cut -d' ' -f1 /proc/loadavg))"
    shm=1
    [ "$path" = tcp ] && shm=0
    DDPX_SHM=$shm "$TRAIN" "${common[@]}" --metrics_out="$OUT/${path}_$round.jsonl" \
      >"$OUT/${path}_$round.log" 2>&1 ||
      { tail "$OUT/${path}_$round.log"; die "ddpx failed: the $path run of round $round (log $OUT/${path}_$round.log)"; }
  done
done

COMM_NPROC=${COMM_NPROC:-4}
COMM_STEPS=${COMM_STEPS:-60}
declare -A hook_of=([allreduce]=allreduce [int8]=int8
                    [hier_int8]="int8:hierarchical=1,local_size=$COMM_NPROC")
echo "step_shm: hooks on one host: $COMM_NPROC ranks, --max_steps=$COMM_STEPS" \
     "--bucket_cap_mb=100, $ROUNDS rounds"
for round in $(seq 1 "$ROUNDS"); do
  for name in allreduce int8 hier_int8; do
    echo "== round $round: $name (load $(cut -d' ' -f1 /proc/loadavg))"
    "$TRAIN" --nproc="$COMM_NPROC" --max_steps="$COMM_STEPS" --bucket_cap_mb=100 \
      --hook="${hook_of[$name]}" --log_every=1000 --seed=0 \
      --metrics_out="$OUT/comm_${name}_$round.jsonl" >"$OUT/comm_${name}_$round.log" 2>&1 ||
      { tail "$OUT/comm_${name}_$round.log"; die "ddpx failed: the $name run of round $round (log $OUT/comm_${name}_$round.log)"; }
  done
done

python3 - "$OUT" "$ROUNDS" "$WARMUP" <<'PY'
import json, statistics, sys
out, rounds, warmup = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])

def median_of(prefix, key):
    values, per_round = [], []
    for r in range(1, rounds + 1):
        vs = [x[key] for x in map(json.loads, open(f"{out}/{prefix}_{r}.jsonl"))
              if x["type"] == "step" and x["step"] > warmup]
        values += vs
        per_round.append(1e3 * statistics.median(vs))
    return 1e3 * statistics.median(values), per_round

med = {path: median_of(path, "step_time_s")[0] for path in ("shm", "tcp")}
comm = {}
for name in ("allreduce", "int8", "hier_int8"):
    comm[name], rounds_ms = median_of(f"comm_{name}", "comm_wait_s")
    step, _ = median_of(f"comm_{name}", "step_time_s")
    print(f"{name:10s} comm wait {comm[name]:7.2f} ms/step (per round: "
          f"{', '.join(f'{v:.2f}' for v in rounds_ms)}), step {step:.2f} ms")
with open("/proc/loadavg") as f:
    load = f.read().split()[0]
print(f"RESULT shm_step_ms={med['shm']:.2f} tcp_step_ms={med['tcp']:.2f} "
      f"step_tcp_vs_shm={med['tcp'] / med['shm']:.3f} "
      f"allreduce_comm_ms_one_host={comm['allreduce']:.2f} int8_comm_ms_one_host={comm['int8']:.2f} "
      f"hier_int8_comm_ms_one_host={comm['hier_int8']:.2f} "
      f"int8_comm_vs_allreduce_one_host={comm['int8'] / comm['allreduce']:.3f} "
      f"hier_int8_comm_vs_allreduce_one_host={comm['hier_int8'] / comm['allreduce']:.3f} "
      f"load={load}")
PY
