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
# Ports and flakes: each job's ranks get a free port from ddpx's launcher
# (bound there and handed over as MASTER_PORT: the trainer's --nproc runs
# it, and the torch side's ranks are started by examples/launcher's
# `launch`). A torch run that fails is retried once, the retry printed
# (bench_env.sh's run_anchor); one that fails twice is left out, and the
# RESULT line is printed anyway ("-" where no torch round is left, with
# anchor_retries and anchor_failures). A failed ddpx run ends the script
# with "ddpx failed" and a non-zero status.
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
LAUNCH=$(built_binary examples/launcher/launch) ||
  die "the launcher not found; bazel build //examples/launcher:launch"
OUT=${OUT:-$(mktemp -d /tmp/step_vs_torch.XXXXXX)}
mkdir -p "$OUT"
rm -f "$OUT/anchor_events"

common+=(--gradient_as_bucket_view="$BUCKET_VIEW")
echo "step_vs_torch: MLP 784-$HIDDEN-10, $NPROC ranks x batch $BATCH, hook $HOOK," \
     "gradient_as_bucket_view=$BUCKET_VIEW, $ROUNDS rounds x $STEPS steps each; load average $(cut -d' ' -f1-3 /proc/loadavg)"
for round in $(seq 1 "$ROUNDS"); do
  echo "== round $round: ddpx (load $(cut -d' ' -f1 /proc/loadavg))"
  nice -n "$NICE" "$TRAIN" "${common[@]}" --metrics_out="$OUT/ddpx_$round.jsonl" \
    >"$OUT/ddpx_$round.log" 2>&1 ||
    { tail "$OUT/ddpx_$round.log"; die "ddpx failed: round $round (log $OUT/ddpx_$round.log): no RESULT"; }
  echo "== round $round: torch (load $(cut -d' ' -f1 /proc/loadavg))"
  # --nproc=0: the script reads RANK and WORLD_SIZE from the launcher.
  run_anchor "torch round $round" "$OUT/torch_$round" nice -n "$NICE" "$LAUNCH" --nproc="$NPROC" -- \
    python3 "$TORCH_SCRIPT" "${common[@]}" --nproc=0 || true
done

python3 - "$OUT" "$ROUNDS" "$WARMUP" "$BUCKET_VIEW" "$(anchor_counts)" <<'PY'
import json, os, statistics, sys
out, rounds, warmup, view, anchor_counts = (sys.argv[1], int(sys.argv[2]), int(sys.argv[3]),
                                            sys.argv[4], sys.argv[5])
med, per_round = {}, {}
for impl in ("ddpx", "torch"):
    pooled = []
    for r in range(1, rounds + 1):
        path = f"{out}/{impl}_{r}.jsonl"
        if not os.path.exists(path):  # a torch round that failed twice
            per_round.setdefault(impl, []).append(None)
            continue
        t = [x["step_time_s"] for x in map(json.loads, open(path))
             if x["type"] == "step" and x["step"] > warmup]
        per_round.setdefault(impl, []).append(1e3 * statistics.median(t))
        pooled += t
    if pooled:
        med[impl] = 1e3 * statistics.median(pooled)
for impl in ("ddpx", "torch"):
    print(f"{impl:6s} " + (f"median step {med[impl]:8.2f} ms" if impl in med else "no round ran")
          + "; per round: " + ", ".join("failed" if m is None else f"{m:.2f}"
                                        for m in per_round[impl]))
pairs = [(d, t) for d, t in zip(per_round["ddpx"], per_round["torch"]) if t is not None]
wins = sum(d <= t for d, t in pairs)
with open("/proc/loadavg") as f:
    load = f.read().split()[0]
torch_ms = f"{med['torch']:.2f}" if "torch" in med else "-"
ratio = f"{med['ddpx'] / med['torch']:.3f}" if "torch" in med else "-"
print(f"RESULT ddpx_step_ms={med['ddpx']:.2f} torch_step_ms={torch_ms} "
      f"step_vs_torch={ratio} ddpx_rounds_won={wins}/{len(pairs)} "
      f"gradient_as_bucket_view={view} {anchor_counts} load={load}")
PY
