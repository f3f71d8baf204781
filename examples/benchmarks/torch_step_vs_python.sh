#!/usr/bin/env bash
# The libtorch trainer with ddpx's DDP (//examples/torch:train) against
# Python PyTorch DDP with gloo (examples/reference/train_torch.py
# --model=cnn) on the same residual CNN, batch, ranks and threads per rank.
#
#   bazel run //examples/benchmarks:torch_step_vs_python
#   ROUNDS=2 STEPS=100 ACC_EPOCHS=0 examples/benchmarks/torch_step_vs_python.sh
#
# Step time: for each hook (allreduce, then PowerSGD) the two run
# alternately, ROUNDS times STEPS steps each, so machine load drifts hit
# both alike; medians over every step after WARMUP of every round. A step is
# the same work on both sides: gather the batch, zero the grads, forward,
# loss, backward with DDP (bucketed, overlapped communication), SGD step.
# Floor: the same steps without communication, in the same rounds: NPROC
# one-rank jobs at once per side (allreduce hook, the threads a rank has in
# the 2-rank runs), so the CPUs and memory are shared as in the 2-rank runs
# but no rank has a peer to talk to. no_comm_step_vs_python compares the two
# sides' compute alone (libtorch against the same kernels under the Python
# interpreter); floor_vs_python is ddpx's no-communication step over Python
# DDP's 2-rank step: the libtorch_step_vs_python ddpx would reach if its DDP
# cost nothing, not even the wait for the slower rank at each sync.
# Synchronous floor, in the same rounds: ddpx's 2-rank job with the
# noop:sync=1 hook (each bucket waits at a barrier, no data moves), so the
# ranks wait for the slower one at every step as with any synchronous DDP;
# sync_floor_vs_python is its step over Python DDP's, what ddpx would reach
# if its collectives cost no more than that barrier.
# Accuracy: each side trains ACC_EPOCHS epochs (3) with ACC_HOOK
# (allreduce) and the same cosine schedule; test accuracy at the end (0
# skips this part: "-" in the RESULT line). Data order differs (ddpx's
# sampler vs torch's), so the two agree statistically, not bit for bit.
# Ports and flakes: each job's ranks get a free port from ddpx's launcher
# (bound there, handed over as MASTER_PORT; see python_job). A Python run
# that fails (the anchor) is retried once and the retry printed
# (bench_env.sh's run_anchor); one that fails twice is left out of the
# medians, so the RESULT line is always printed, with "-" for a ratio that
# has no Python run left. A failure of a libtorch + ddpx run ends the
# benchmark with "ddpx failed" and a non-zero status: that is a result.
# Last line:
#   RESULT libtorch_step_vs_python=<ddpx/torch, allreduce>
#          powersgd_step_vs_python=<ddpx/torch, PowerSGD>
#          no_comm_step_vs_python=<ddpx/torch, NPROC one-rank jobs at once>
#          floor_vs_python=<ddpx no-comm / torch allreduce>
#          sync_floor_vs_python=<ddpx noop:sync=1 / torch allreduce>
#          cnn_test_acc=<ddpx %> python_test_acc=<torch %> acc_epochs=...
#          anchor_retries=<Python runs retried> anchor_failures=<failed twice> load=...
# Environment: TORCH_TRAIN, NPROC (2), WIDTH (16), BATCH (64), THREADS (0:
# cores / ranks), PSGD (powersgd:rank=2,start_iter=10), ROUNDS (3), STEPS
# (100), WARMUP (10), ACC_EPOCHS (3), ACC_HOOK (allreduce), NICE (0), OUT.
set -euo pipefail
# Both sides train on the CPU. On a machine with a GPU, torch's powerSGD_hook
# calls torch.cuda.synchronize(device) whenever CUDA is available
# (powerSGD_hook.py, decompress), which fails for a CPU bucket ("Expected a
# cuda device, but got: cpu"): hide the GPUs from both sides.
export CUDA_VISIBLE_DEVICES=

NPROC=${NPROC:-2}
WIDTH=${WIDTH:-16}
BATCH=${BATCH:-64}
THREADS=${THREADS:-0}
PSGD=${PSGD:-powersgd:rank=2,start_iter=10}
ROUNDS=${ROUNDS:-3}
STEPS=${STEPS:-100}
WARMUP=${WARMUP:-10}
ACC_EPOCHS=${ACC_EPOCHS:-3}
ACC_HOOK=${ACC_HOOK:-allreduce}
NICE=${NICE:-0}

die() { echo "torch_step_vs_python: $*" >&2; exit 1; }
. "$(dirname "$0")/bench_env.sh" 2>/dev/null ||
  . "$0.runfiles/ddpx/examples/benchmarks/bench_env.sh"  # here, workspace, built_binary, run_anchor
[ -n "${TORCH_TRAIN:-}" ] || TORCH_TRAIN=$(built_binary examples/torch/train) || true
[ -x "${TORCH_TRAIN:-}" ] || die "libtorch trainer not found; bazel build //examples/torch:train or set TORCH_TRAIN"
LAUNCH=$(built_binary examples/launcher/launch) ||
  die "the launcher not found; bazel build //examples/launcher:launch"
PY_SCRIPT=$workspace/examples/reference/train_torch.py
[ -f "$PY_SCRIPT" ] || PY_SCRIPT=$here/../reference/train_torch.py
python3 -c 'import torch' 2>/dev/null || die "torch is not importable (tools/setup)"
OUT=${OUT:-$(mktemp -d /tmp/torch_step_vs_python.XXXXXX)}
mkdir -p "$OUT"
rm -f "$OUT/anchor_events"

common=(--model=cnn --width="$WIDTH" --batch_size="$BATCH" --lr=0.02 --momentum=0.9 --seed=0
        --lr_schedule=cosine --threads="$THREADS")
# The Python side's ranks: started by ddpx's launcher (examples/launcher),
# which binds a free port below the ephemeral range and hands it to them
# as MASTER_PORT, afresh for every attempt; --nproc=0 makes train_torch.py
# read RANK and WORLD_SIZE. The libtorch trainer's --nproc runs the same
# launcher.
python_job() {  # python_job NPROC ARGS...: sets `job`, the command of one Python DDP job
  local n=$1
  shift
  job=(nice -n "$NICE" "$LAUNCH" --nproc="$n" -- python3 "$PY_SCRIPT" "${common[@]}" --nproc=0 "$@")
}

run_ddpx() {  # run_ddpx TAG HOOK EXTRA...: the libtorch side; its failure ends the benchmark
  local tag=$1 hook=$2 prefix=$OUT/ddpx_$1
  shift 2
  echo "== $tag: libtorch + ddpx (load $(cut -d' ' -f1 /proc/loadavg))"
  nice -n "$NICE" "$TORCH_TRAIN" "${common[@]}" --nproc="$NPROC" --hook="$hook" "$@" \
    --metrics_out="$prefix.jsonl" >"$prefix.log" 2>&1 ||
    { tail "$prefix.log"; die "ddpx failed: $tag (libtorch + ddpx; log $prefix.log): no RESULT"; }
}

run_python() {  # run_python TAG HOOK EXTRA...: the Python anchor, retried once if it fails
  local tag=$1 hook=$2
  shift 2
  echo "== $tag: python torch DDP (load $(cut -d' ' -f1 /proc/loadavg))"
  python_job "$NPROC" --hook="$hook" "$@"
  run_anchor "python torch DDP $tag" "$OUT/torch_$tag" "${job[@]}" || true
}

run_pair() {  # run_pair TAG HOOK EXTRA...: the libtorch side, then Python's
  run_ddpx "$@"
  run_python "$@"
}

run_alone_pair() {  # run_alone_pair TAG THREADS EXTRA...: NPROC one-rank jobs at once, each side
  local tag=$1 threads=$2 k pids=()
  shift 2
  echo "== $tag: $NPROC one-rank libtorch + ddpx jobs at once (load $(cut -d' ' -f1 /proc/loadavg))"
  for k in $(seq 1 "$NPROC"); do
    nice -n "$NICE" "$TORCH_TRAIN" "${common[@]}" --nproc=1 --threads="$threads" "$@" \
      --metrics_out="$OUT/ddpx_${tag}_$k.jsonl" >"$OUT/ddpx_${tag}_$k.log" 2>&1 &
    pids+=($!)
  done
  for k in "${!pids[@]}"; do
    wait "${pids[$k]}" || die "ddpx failed: $tag, one-rank job $((k + 1)) (log $OUT/ddpx_${tag}_$((k + 1)).log): no RESULT"
  done
  echo "== $tag: $NPROC one-rank python torch jobs at once (load $(cut -d' ' -f1 /proc/loadavg))"
  python_job 1 --threads="$threads" "$@"
  run_anchor --copies="$NPROC" "python torch $tag ($NPROC one-rank jobs)" "$OUT/torch_$tag" \
    "${job[@]}" || true
}

echo "torch_step_vs_python: ResidualCNN(width $WIDTH), $NPROC ranks x batch $BATCH," \
     "threads/rank $THREADS (0: cores/ranks), $ROUNDS rounds x $STEPS steps per hook," \
     "accuracy after $ACC_EPOCHS epochs with $ACC_HOOK; load average $(cut -d' ' -f1-3 /proc/loadavg)"
cores=$(nproc)
rank_threads=$THREADS
[ "$rank_threads" -gt 0 ] || rank_threads=$(( cores / NPROC > 0 ? cores / NPROC : 1 ))
for round in $(seq 1 "$ROUNDS"); do
  run_pair "allreduce_$round" allreduce --max_steps="$STEPS" --epochs=1 --log_every=1000
  run_pair "powersgd_$round" "$PSGD" --max_steps="$STEPS" --epochs=1 --log_every=1000
  run_alone_pair "nocomm_$round" "$rank_threads" --hook=allreduce \
    --max_steps="$STEPS" --epochs=1 --log_every=1000
  run_ddpx "sync_$round" noop:sync=1 --max_steps="$STEPS" --epochs=1 --log_every=1000
done
if [ "$ACC_EPOCHS" -gt 0 ]; then
  run_pair accuracy "$ACC_HOOK" --epochs="$ACC_EPOCHS" --log_every=100
fi

python3 - "$OUT" "$ROUNDS" "$WARMUP" "$ACC_EPOCHS" "$NPROC" "$(anchor_counts)" <<'PY'
import json, os, statistics, sys
out, rounds, warmup, acc_epochs, nproc = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4]), int(sys.argv[5])
anchor_counts = sys.argv[6]

def lines(path):
    return [json.loads(l) for l in open(path)]

def step_times(files):  # every step after the warmup, in seconds
    return [x["step_time_s"] for f in files for x in lines(f)
            if x["type"] == "step" and x["step"] > warmup]

# A round whose Python anchor failed twice has no torch_* file: the medians
# are over the rounds both sides ran; with none, the ratio is "-".
ratio, medians = {}, {}
for hook in ("allreduce", "powersgd", "nocomm"):
    med = {}
    for impl in ("ddpx", "torch"):
        pooled, per_round = [], []
        for r in range(1, rounds + 1):
            files = ([f"{out}/{impl}_{hook}_{r}_{k}.jsonl" for k in range(1, nproc + 1)]
                     if hook == "nocomm" else [f"{out}/{impl}_{hook}_{r}.jsonl"])
            if not all(os.path.exists(f) for f in files):
                per_round.append(None)
                continue
            t = step_times(files)
            per_round.append(1e3 * statistics.median(t))
            pooled += t
        if pooled:
            med[impl] = 1e3 * statistics.median(pooled)
        print(f"{hook:9s} {'libtorch+ddpx' if impl == 'ddpx' else 'python torch':13s} "
              + (f"median step {med[impl]:7.2f} ms" if impl in med else "no round ran")
              + "; per round: " + ", ".join("failed" if m is None else f"{m:.2f}" for m in per_round))
    ratio[hook] = med["ddpx"] / med["torch"] if "torch" in med else None
    medians[hook] = med
sync_floor = 1e3 * statistics.median(
    step_times([f"{out}/ddpx_sync_{r}.jsonl" for r in range(1, rounds + 1)]))
print(f"{'sync':9s} {'libtorch+ddpx':13s} median step {sync_floor:7.2f} ms (noop:sync=1: "
      "the wait for the slower rank, no data)")
acc = {}
if acc_epochs > 0:
    for impl in ("ddpx", "torch"):
        path = f"{out}/{impl}_accuracy.jsonl"
        epochs = [x for x in lines(path) if x["type"] == "epoch"] if os.path.exists(path) else []
        if not epochs:
            print(f"{'python torch':13s} test accuracy: its run failed twice")
            continue
        acc[impl] = 100 * epochs[-1]["test_acc"]
        print(f"{'libtorch+ddpx' if impl == 'ddpx' else 'python torch':13s} test accuracy per "
              "epoch: " + ", ".join(f"{100 * e['test_acc']:.2f}%" for e in epochs))
with open("/proc/loadavg") as f:
    load = f.read().split()[0]
fmt = lambda k: f"{acc[k]:.2f}" if k in acc else "-"
num = lambda v: "-" if v is None else f"{v:.3f}"
over_torch = lambda v: None if "torch" not in medians["allreduce"] else v / medians["allreduce"]["torch"]
print(f"RESULT libtorch_step_vs_python={num(ratio['allreduce'])} "
      f"powersgd_step_vs_python={num(ratio['powersgd'])} "
      f"no_comm_step_vs_python={num(ratio['nocomm'])} "
      f"floor_vs_python={num(over_torch(medians['nocomm']['ddpx']))} "
      f"sync_floor_vs_python={num(over_torch(sync_floor))} "
      f"cnn_test_acc={fmt('ddpx')} python_test_acc={fmt('torch')} "
      f"acc_epochs={acc_epochs} {anchor_counts} load={load}")
PY
