#!/usr/bin/env bash
# The results table of issue 5: every communication hook trains the same
# model with the same seed, epochs and hyperparameters (a cosine learning-rate
# schedule, applied per step identically to every hook), and the script
# prints final test accuracy, wall time, bytes per step and compression ratio
# per hook, writes every run's metrics JSON lines, and draws test accuracy
# against wall time (gnuplot PNG).
#
#   bazel run //examples/benchmarks:accuracy_table
#   EPOCHS=2 RUNS="allreduce int8" examples/benchmarks/accuracy_table.sh   # a quick look
#
# Runs (name: ranks x batch per rank, hook):
#   allreduce, fp16, bf16, int8, powersgd{1,2,4}, batched_powersgd{1,2,4}: 2 x 64
#   int8_hier: 4 x 32 (the same global batch of 128) with local_size=2, so
#     ranks {0,1} and {2,3} are two "nodes": reduce inside a node, quantized
#     exchange between the two leaders, broadcast inside the node;
#   allreduce_4x32: its full-precision anchor with the same 4 x 32 layout;
#   batched_powersgd2_noef: batched rank 2 without error feedback (with it,
#     batched ranks 1-4 diverge at these hyperparameters; docs/examples.md).
# PowerSGD compresses from step 10 (error feedback and warm start on), not
# torch's default 1000, so nearly all of training is compressed.
#
# Environment: TRAIN (trainer binary), OUT (metrics dir), RUNS (subset of the
# names above), EPOCHS (8), HIDDEN (512,256), LR (0.05), MOMENTUM (0.9),
# SCHEDULE (cosine), SEED (0), PNG (docs/examples_accuracy.png), NICE (10),
# REUSE=1 (keep runs whose metrics already exist in OUT).
set -euo pipefail

EPOCHS=${EPOCHS:-8}
HIDDEN=${HIDDEN:-512,256}
LR=${LR:-0.05}
MOMENTUM=${MOMENTUM:-0.9}
SCHEDULE=${SCHEDULE:-cosine}
SEED=${SEED:-0}
NICE=${NICE:-10}
RUNS=${RUNS:-"allreduce fp16 bf16 int8 powersgd1 powersgd2 powersgd4 batched_powersgd1
  batched_powersgd2 batched_powersgd4 batched_powersgd2_noef allreduce_4x32 int8_hier"}

die() { echo "accuracy_table: $*" >&2; exit 1; }
. "$(dirname "$0")/trainer.sh" 2>/dev/null ||
  . "$0.runfiles/ddpx/examples/benchmarks/trainer.sh"  # here, workspace, TRAIN
plot=$workspace/tools/plot_accuracy
[ -x "$plot" ] || die "$plot not found"
OUT=${OUT:-$(mktemp -d /tmp/accuracy_table.XXXXXX)}
PNG=${PNG:-$workspace/docs/examples_accuracy.png}
mkdir -p "$OUT"

spec() {  # name -> "nproc batch hook"
  case $1 in
    allreduce|fp16|bf16|int8) echo "2 64 $1" ;;
    powersgd[0-9]*) echo "2 64 powersgd:rank=${1#powersgd},start_iter=10" ;;
    batched_powersgd2_noef) echo "2 64 batched_powersgd:rank=2,start_iter=10,use_error_feedback=0" ;;
    batched_powersgd[0-9]*) echo "2 64 batched_powersgd:rank=${1#batched_powersgd},start_iter=10" ;;
    allreduce_4x32) echo "4 32 allreduce" ;;
    int8_hier) echo "4 32 int8:hierarchical=1,local_size=2" ;;
    *) die "unknown run '$1'" ;;
  esac
}

echo "accuracy_table: MLP 784-$HIDDEN-10, $EPOCHS epochs, lr $LR ($SCHEDULE), momentum" \
     "$MOMENTUM, seed $SEED; metrics in $OUT; load average $(cut -d' ' -f1-3 /proc/loadavg)"
for name in $RUNS; do
  read -r nproc batch hook < <(spec "$name")
  metrics=$OUT/$name.jsonl
  if [ "${REUSE:-0}" = 1 ] && grep -q '"type":"epoch"' "$metrics" 2>/dev/null; then
    echo "== $name: reusing $metrics"
    continue
  fi
  rm -f "$metrics" "$OUT/$name.trace".rank*
  echo "== $name: $nproc ranks x batch $batch, --hook=$hook (load $(cut -d' ' -f1 /proc/loadavg))"
  if ! nice -n "$NICE" "$TRAIN" --nproc="$nproc" \
      --batch_size="$batch" --hook="$hook" \
      --hidden="$HIDDEN" --epochs="$EPOCHS" --lr="$LR" --momentum="$MOMENTUM" \
      --lr_schedule="$SCHEDULE" --seed="$SEED" --log_every=1000 --metrics_out="$metrics" \
      --timeout_s=600 >"$OUT/$name.log" 2>&1; then
    tail -20 "$OUT/$name.log"
    die "the run '$name' failed (log: $OUT/$name.log)"
  fi
  grep -E "^done" "$OUT/$name.log"
done

layouts=()
for name in $RUNS; do read -r nproc batch _ < <(spec "$name"); layouts+=("$name:$nproc:$batch"); done
python3 - "$OUT" "${layouts[@]}" <<'PY' | tee "$OUT/table.md"
import json, statistics, sys
out = sys.argv[1]
rows, anchor = [], {}
for layout in sys.argv[2:]:
    name, nproc, batch = layout.split(":")
    steps, last = [], None
    for line in open(f"{out}/{name}.jsonl"):
        r = json.loads(line)
        if r["type"] == "step":
            steps.append(r)
        elif r["type"] == "epoch":
            last = r
    # PowerSGD sends full gradients for its first 10 steps; bytes per step is
    # the median over the run (what it sends almost always).
    sent = statistics.median(s["bytes_sent"] for s in steps)
    grad = steps[-1]["gradient_bytes"]
    rows.append((name, last, sent, grad, len(steps), batch))
    if name in ("allreduce", "allreduce_4x32"):
        anchor[last["world_size"]] = last["test_acc"]
print("| run | hook | ranks x batch | steps | test acc (%) | vs full precision (points) "
      "| wall (s) | sent/step (B) | compression |")
print("|---|---|---|---|---|---|---|---|---|")
for name, last, sent, grad, n, batch in rows:
    ref = anchor.get(last["world_size"])
    delta = f"{100 * (last['test_acc'] - ref):+.2f}" if ref is not None else "-"
    # int8 hierarchical talks through its own node/leader subgroups, which
    # DDP's byte counter (on the main group) does not see.
    traffic = f"{sent:,.0f} | {grad / sent:.1f}x" if sent > 0 else "not counted (subgroups) | -"
    print(f"| {name} | `{last['hook']}` | {last['world_size']} x {batch} "
          f"| {n} | {100 * last['test_acc']:.2f} | {delta} | {last['wall_s']:.1f} | {traffic} |")
PY
# Runs that ended at chance level (diverged) would squash every other line
# into the top of the plot: they stay in the table and are left out here.
labels=()
for name in $RUNS; do
  if python3 -c "import json,sys; e=[r for r in map(json.loads, open(sys.argv[1])) if r['type']=='epoch']; sys.exit(e[-1]['test_acc'] < 0.5)" "$OUT/$name.jsonl"; then
    labels+=("${name//_/ }=$OUT/$name.jsonl")  # gnuplot reads _ as a subscript
  else
    echo "plot: leaving out $name (final test accuracy below 50%: diverged)"
  fi
done
"$plot" "$PNG" "${labels[@]}"
echo "load average at the end: $(cut -d' ' -f1-3 /proc/loadavg)"
