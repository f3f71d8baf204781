#!/usr/bin/env bash
# Step time of //examples:train (DDP + allreduce hook over our Gloo backend)
# against PyTorch DDP with gloo (examples/reference/train_torch.py): same
# model, hyperparameters, ranks, batch and threads per rank. The two run
# alternately, ROUNDS times STEPS steps each, so machine load drifts hit
# both alike; the medians are over every step after WARMUP of every round.
#
#   bazel run //examples/benchmarks:step_vs_torch
#   ROUNDS=2 STEPS=100 examples/benchmarks/step_vs_torch.sh
#
# A step is the same work on both sides: gather the batch, zero the grads,
# forward, loss, backward with DDP's bucketed allreduce, SGD step (no
# evaluation, no logging I/O in the timed part). Last line:
#   RESULT ddpx_step_ms=... torch_step_ms=... step_vs_torch=<ddpx/torch> ...
# BUCKET_VIEW (1) sets DDP's gradient_as_bucket_view on both sides alike
# (examples/train's default is on; torch's default is off).
# Environment: TRAIN, NPROC (2), HIDDEN (2048,2048), BATCH (64), HOOK
# (allreduce), BUCKET_VIEW (1), ROUNDS (3), STEPS (200), WARMUP (10), NICE
# (0), OUT.
set -euo pipefail

NICE=${NICE:-0}
BUCKET_VIEW=${BUCKET_VIEW:-1}

die() { echo "step_vs_torch: $*" >&2; exit 1; }
. "$(dirname "$0")/trainer.sh" 2>/dev/null ||
  . "$0.runfiles/ddpx/examples/benchmarks/trainer.sh"  # here, workspace, TRAIN
step_time_setup 200
TORCH_SCRIPT=$workspace/examples/reference/train_torch.py
[ -f "$TORCH_SCRIPT" ] || TORCH_SCRIPT=$here/../reference/train_torch.py
python3 -c 'import torch' 2>/dev/null || die "torch is not importable (pip install torch)"
OUT=${OUT:-$(mktemp -d /tmp/step_vs_torch.XXXXXX)}
mkdir -p "$OUT"

common+=(--gradient_as_bucket_view="$BUCKET_VIEW")
echo "step_vs_torch: MLP 784-$HIDDEN-10, $NPROC ranks x batch $BATCH, hook $HOOK," \
     "gradient_as_bucket_view=$BUCKET_VIEW, $ROUNDS rounds x $STEPS steps each; load average $(cut -d' ' -f1-3 /proc/loadavg)"
for round in $(seq 1 "$ROUNDS"); do
  echo "== round $round: ddpx (load $(cut -d' ' -f1 /proc/loadavg))"
  nice -n "$NICE" "$TRAIN" "${common[@]}" --metrics_out="$OUT/ddpx_$round.jsonl" \
    >"$OUT/ddpx_$round.log" 2>&1 || { tail "$OUT/ddpx_$round.log"; die "ddpx run failed"; }
  echo "== round $round: torch (load $(cut -d' ' -f1 /proc/loadavg))"
  nice -n "$NICE" python3 "$TORCH_SCRIPT" "${common[@]}" --metrics_out="$OUT/torch_$round.jsonl" \
    >"$OUT/torch_$round.log" 2>&1 || { tail "$OUT/torch_$round.log"; die "torch run failed"; }
done

python3 - "$OUT" "$ROUNDS" "$WARMUP" "$BUCKET_VIEW" <<'PY'
import json, statistics, sys
out, rounds, warmup, view = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), sys.argv[4]
med, per_round = {}, {}
for impl in ("ddpx", "torch"):
    pooled = []
    for r in range(1, rounds + 1):
        t = [x["step_time_s"] for x in map(json.loads, open(f"{out}/{impl}_{r}.jsonl"))
             if x["type"] == "step" and x["step"] > warmup]
        per_round.setdefault(impl, []).append(1e3 * statistics.median(t))
        pooled += t
    med[impl] = 1e3 * statistics.median(pooled)
for impl in ("ddpx", "torch"):
    print(f"{impl:6s} median step {med[impl]:8.2f} ms; per round: "
          + ", ".join(f"{m:.2f}" for m in per_round[impl]))
wins = sum(d <= t for d, t in zip(per_round["ddpx"], per_round["torch"]))
with open("/proc/loadavg") as f:
    load = f.read().split()[0]
print(f"RESULT ddpx_step_ms={med['ddpx']:.2f} torch_step_ms={med['torch']:.2f} "
      f"step_vs_torch={med['ddpx'] / med['torch']:.3f} ddpx_rounds_won={wins}/{rounds} "
      f"gradient_as_bucket_view={view} load={load}")
PY
