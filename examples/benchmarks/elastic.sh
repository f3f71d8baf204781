#!/usr/bin/env bash
# Elastic training against a restart (docs/elastic.md): 4 ranks of
# //examples:train, kill -9 of one rank mid-training.
#
#   bazel run //examples/benchmarks:elastic
#   KILL_AT=120 examples/benchmarks/elastic.sh
#
# ours: --elastic --nproc=4 --max_restarts=1; at step KILL_AT (a step is a
#   few ms, so the kill lands at a random instant of one) rank slot 2 gets
#   kill -9. recovery_s: from the kill to the first step committed by the
#   next generation (its step line's unix_ms); steps_lost: the membership
#   line's; replacement_join_s: from the launcher starting the replacement
#   to the first step of the generation that admitted it.
# sigstop: the same job, rank slot 3 gets SIGSTOP at KILL_AT;
#   sigstop_detect_s: from the stop to the membership line of the
#   generation formed without it (then SIGCONT: it is refused).
# anchor: torchrun --max-restarts=1 --nproc-per-node=4 on the same trainer
#   without --elastic, checkpoints every 50 steps (--checkpoint_every=50):
#   torchrun restarts every worker, which resume from the last checkpoint.
#   Its time: from the kill to the first step line past the last step seen
#   before the kill (the script polls for it every 20 ms).
#   recovery_vs_torchrun_restart = ours' recovery_s / the anchor's.
# A run that fails ends the script with "ddpx failed" or "anchor failed".
# Last line: RESULT recovery_s=... steps_lost=... sigstop_detect_s=...
#   replacement_join_s=... torchrun_restart_s=... recovery_vs_torchrun_restart=...
#   load=...
# Environment: TRAIN, HIDDEN (256,256), BATCH (32), KILL_AT (120),
#   TIMEOUT_S (3: the op timeout, which bounds an op waiting for a stopped
#   rank), HEARTBEAT_S (0.5), OUT; DDPX_TORCH_PYTHON (python3).
set -euo pipefail

die() { echo "elastic: $*" >&2; exit 1; }
. "$(dirname "$0")/trainer.sh" 2>/dev/null ||
  . "$0.runfiles/ddpx/examples/benchmarks/trainer.sh"  # here, workspace, TRAIN
HIDDEN=${HIDDEN:-256,256}
BATCH=${BATCH:-32}
KILL_AT=${KILL_AT:-120}
TIMEOUT_S=${TIMEOUT_S:-3}
HEARTBEAT_S=${HEARTBEAT_S:-0.5}
OUT=${OUT:-$(mktemp -d /tmp/elastic_bench.XXXXXX)}
python=${DDPX_TORCH_PYTHON:-python3}
mkdir -p "$OUT"
common=(--hidden="$HIDDEN" --batch_size="$BATCH" --train_limit=60000 --epochs=2
        --log_every=1000 --seed=0 --timeout_s="$TIMEOUT_S")

now() { date +%s.%N; }
# The largest "step" in a metrics file's step lines (0 when none).
last_step() { awk 'match($0, /"type":"step","epoch":[0-9]+,"step":[0-9]+/) {
                s = substr($0, RSTART, RLENGTH); sub(/.*"step":/, "", s); if (s + 0 > m) m = s + 0 }
              END { print m + 0 }' "$1" 2>/dev/null || echo 0; }
wait_step() {  # FILE STEP PID: until FILE has a step >= STEP
  while [ "$(last_step "$1")" -lt "$2" ]; do
    kill -0 "$3" 2>/dev/null || die "the job ended before step $2 (logs in $OUT)"
    sleep 0.02
  done
}
# The pid of a child of PARENT (or of its children) with RANK=SLOT.
rank_pid() {
  for p in $(pgrep -P "$1") $(for c in $(pgrep -P "$1"); do pgrep -P "$c"; done); do
    if grep -qxz "RANK=$2" "/proc/$p/environ" 2>/dev/null; then echo "$p"; return; fi
  done
}
field() { sed -n "s/.*\"$1\":\"\{0,1\}\([^,\"}]*\).*/\1/p"; }

echo "elastic: MLP 784-$HIDDEN-10, 4 ranks x batch $BATCH, kill at step $KILL_AT;" \
     "load average $(cut -d' ' -f1-3 /proc/loadavg)"

# ---- ours: kill -9 and a replacement
"$TRAIN" --elastic --nproc=4 --max_restarts=1 --heartbeat_s="$HEARTBEAT_S" "${common[@]}" \
  --metrics_out="$OUT/ours.jsonl" >"$OUT/ours.log" 2>&1 &
job=$!
wait_step "$OUT/ours.jsonl" "$KILL_AT" "$job"
victim=$(rank_pid "$job" 2)
[ -n "$victim" ] || die "ddpx failed: no rank in slot 2"
t_kill=$(now); kill -9 "$victim"
wait "$job" || die "ddpx failed: the elastic job ended with $? (log $OUT/ours.log)"
first_after=$(awk '/"type":"step"/ && !/"generation":0,/ {print; exit}' "$OUT/ours.jsonl")
[ -n "$first_after" ] || die "ddpx failed: no step after the kill (log $OUT/ours.log)"
recovery=$(echo "$(echo "$first_after" | field unix_ms) / 1000 - $t_kill" | bc -l)
membership=$(awk '/"type":"membership"/ {print; exit}' "$OUT/ours.jsonl")
steps_lost=$(echo "$membership" | field steps_lost)
t_start=$(sed -n 's/.*starting a replacement.* at unix \([0-9.]*\).*/\1/p' "$OUT/ours.log")
join_gen=$(awk '/"type":"membership"/ && !/"joined":"",/ {print; exit}' "$OUT/ours.jsonl" | field generation)
replacement_join=nan
if [ -n "$t_start" ] && [ -n "$join_gen" ]; then
  first_joined=$(awk -v g="\"generation\":$join_gen," '/"type":"step"/ && index($0, g) {print; exit}' "$OUT/ours.jsonl")
  [ -n "$first_joined" ] && replacement_join=$(echo "$(echo "$first_joined" | field unix_ms) / 1000 - $t_start" | bc -l)
fi
echo "ours: recovery ${recovery} s, steps lost $steps_lost, replacement join ${replacement_join} s"

# ---- sigstop
"$TRAIN" --elastic --nproc=4 --heartbeat_s="$HEARTBEAT_S" "${common[@]}" \
  --metrics_out="$OUT/stop.jsonl" >"$OUT/stop.log" 2>&1 &
job=$!
wait_step "$OUT/stop.jsonl" "$KILL_AT" "$job"
victim=$(rank_pid "$job" 3)
t_stop=$(now); kill -STOP "$victim"
while ! grep -q '"type":"membership"' "$OUT/stop.jsonl"; do
  kill -0 "$job" 2>/dev/null || break
  sleep 0.02
done
kill -CONT "$victim"
wait "$job" || die "ddpx failed: the SIGSTOP job ended with $? (log $OUT/stop.log)"
detect=$(echo "$(awk '/"type":"membership"/ {print; exit}' "$OUT/stop.jsonl" | field unix_ms) / 1000 - $t_stop" | bc -l)
echo "sigstop: the others went on without it after ${detect} s"

# ---- anchor: torchrun restarting every worker from the last checkpoint
anchor=nan
if "$python" -c 'import torch.distributed.run' 2>/dev/null; then
  rm -rf "$OUT/ckpt"
  "$python" -m torch.distributed.run --no-python --nproc-per-node=4 --max-restarts=1 \
    "$TRAIN" --init=env:// "${common[@]}" --checkpoint_dir="$OUT/ckpt" --checkpoint_every=50 \
    --metrics_out="$OUT/anchor.jsonl" >"$OUT/anchor.log" 2>&1 &
  job=$!
  wait_step "$OUT/anchor.jsonl" "$KILL_AT" "$job"
  victim=$(rank_pid "$job" 2)
  [ -n "$victim" ] || die "anchor failed: no rank in slot 2"
  t_kill=$(now); kill -9 "$victim"
  # Read after the kill: no step past these can have been written before it.
  seen=$(last_step "$OUT/anchor.jsonl")
  lines=$(wc -l <"$OUT/anchor.jsonl")
  while ! awk -v n="$lines" -v want="\"step\":$((seen + 1))," \
          'NR > n && /"type":"step"/ && index($0, want) {found = 1} END {exit !found}' \
          "$OUT/anchor.jsonl"; do
    kill -0 "$job" 2>/dev/null || die "anchor failed: torchrun ended before step $((seen + 1)) (log $OUT/anchor.log)"
    sleep 0.02
  done
  anchor=$(echo "$(now) - $t_kill" | bc -l)
  wait "$job" || die "anchor failed: torchrun ended with $? (log $OUT/anchor.log)"
  echo "anchor: torchrun restart to step $((seen + 1)) took ${anchor} s"
else
  echo "anchor: torch is not importable by $python; no anchor"
fi
ratio=nan
[ "$anchor" != nan ] && ratio=$(echo "$recovery / $anchor" | bc -l)
printf 'RESULT recovery_s=%.3f steps_lost=%s sigstop_detect_s=%.3f replacement_join_s=%s torchrun_restart_s=%s recovery_vs_torchrun_restart=%s load=%s\n' \
  "$recovery" "$steps_lost" "$detect" "$(printf %.3f "$replacement_join" 2>/dev/null || echo nan)" \
  "$(printf %.3f "$anchor" 2>/dev/null || echo nan)" "$(printf %.3f "$ratio" 2>/dev/null || echo nan)" \
  "$(cut -d' ' -f1 /proc/loadavg)"
