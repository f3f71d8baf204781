#!/usr/bin/env bash
# Step time of //examples:train with the shared-memory path (the default for
# ranks on one host) against the same run with DDPX_SHM=0 (loopback TCP):
# same model, hyperparameters, ranks and batch. The two run alternately,
# ROUNDS times STEPS steps each; medians over every step after WARMUP.
#
#   bazel run //examples/benchmarks:step_shm
#   NPROC=4 ROUNDS=2 examples/benchmarks/step_shm.sh
#
# Both sides are ddpx (no anchor to retry): a failed run ends the script
# with "ddpx failed" and a non-zero status, without a RESULT line.
# Last line: RESULT shm_step_ms=... tcp_step_ms=... step_tcp_vs_shm=<tcp/shm> load=...
# Environment: TRAIN, NPROC (2), HIDDEN (2048,2048), BATCH (64), HOOK
# (allreduce), ROUNDS (3), STEPS (150), WARMUP (10), OUT.
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

python3 - "$OUT" "$ROUNDS" "$WARMUP" <<'PY'
import json, statistics, sys
out, rounds, warmup = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
med = {}
for path in ("shm", "tcp"):
    steps = []
    for r in range(1, rounds + 1):
        steps += [x["step_time_s"] for x in map(json.loads, open(f"{out}/{path}_{r}.jsonl"))
                  if x["type"] == "step" and x["step"] > warmup]
    med[path] = 1e3 * statistics.median(steps)
with open("/proc/loadavg") as f:
    load = f.read().split()[0]
print(f"RESULT shm_step_ms={med['shm']:.2f} tcp_step_ms={med['tcp']:.2f} "
      f"step_tcp_vs_shm={med['tcp'] / med['shm']:.3f} load={load}")
PY
