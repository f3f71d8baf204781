#!/usr/bin/env bash
# The trainer across virtual hosts (tools/virtual_cluster: namespaces on one
# bridge, every host's link limited to RATE both ways), per topology (hosts
# x ranks) and per communication scheme: median step time, communication
# time, bytes through each host's link per step, and those bytes against
# what the scheme's algorithm must send.
#
#   sudo examples/benchmarks/multi_host.sh                     # 2x2 and 3x2 at 1gbit
#   TOPOLOGIES="2x2" SCHEMES="allreduce two_level" sudo -E examples/benchmarks/multi_host.sh
#
# Schemes: allreduce (flat, DDPX_GLOO_TWO_LEVEL=0), two_level (allreduce in
# two levels across hosts), fp16, int8 (flat), int8_hier (int8:hierarchical:
# float32 inside the host, int8 slices across), powersgd2 (rank 2). Every
# scheme trains with one 100 MiB bucket (the 23.3 MB model in one piece).
#
# Bytes per step come from the veth counters of two runs of different
# length (LONG and SHORT steps), so start-up is left out. Communication
# time per step is the communication hook's time per bucket on the shared
# clock, from the last rank's entry to the last rank's completion
# (comm_time.py's hook measure, as in bandwidth_limited.sh): it includes the
# hook's compression math and the collectives of its own subgroups. With M the model's bytes, H hosts and L ranks per
# host, what each scheme's algorithm must send through one host's uplink
# per step ("ideal"):
#   two_level:   B = 2(H-1)/H * M (no allreduce can send less)
#   fp16:        B / 2 (its half-precision bucket goes in two levels)
#   int8:        ByteGrad over W = H L ranks, records of M/(4W) + 8 bytes:
#                the alltoall sends L (W-L) of them off each host, the
#                allgather (Gloo's ring, in rank order) W-1 over each host's
#                one outgoing ring edge: (L (W-L) + W - 1) records
#   int8_hier:   ByteGrad of each of the L slices over H ranks, every record
#                off-host: 2 L (H-1) records of M/(4 L H) + 8 bytes
#   allreduce:   flat; its algorithm (Gloo's halving-doubling at these
#                sizes) has no such single figure: compared with B only
#   powersgd2:   not bandwidth-bound; reported, not compared (rank 2, the last
#                layer uncompressed: see min_compression_rate below)
# The epoch runs (ACCURACY=1) train every scheme the way a fixed budget is
# usually trained: the learning rate decays to 0 over the epoch
# (--lr_schedule=cosine). With a constant rate, rank-2 PowerSGD ended
# 0.27-1.87 points below allreduce (mean 1.04, 6 seeds); with the decay and
# the same start, 0.48-0.71 (mean 0.60).
# PowerSGD's start_powerSGD_iter (allreduce before it): PyTorch's
# PowerSGDState documentation advises starting "with 10% of total training
# steps" and increasing it until the accuracy is satisfactory. The epoch run
# takes 20%: ceil(steps per epoch / 5), the steps per epoch as the trainer
# prints them for this topology and batch (235 on 2x2 at batch 64: start
# 47), the first start at which each of 6 seeds ended within 0.5 points of
# allreduce (0.23-0.49 below; docs/powersgd.md, "One epoch on the
# multi-host benchmark's MLP"). The timed runs start at step 10, within the SKIP
# steps left out of the medians, so every timed step compresses.
# PowerSGD's min_compression_rate is 6, not PowerSGDState's default 2: a
# matrix compresses when (rows + cols) x rank x rate < rows x cols, and at
# rank 2 the last layer (10 x 2048) saves only 4.98x while the hidden ones
# save 283x and 512x. At 6 the last layer goes whole (80 kB more per step),
# which ends the epoch 1.1 points higher on average over 6 seeds on one
# machine (torch's own powerSGD_hook on the same runs: 0.8 over 4; same
# section of docs/powersgd.md): a rank-2 approximation of a 10-row
# gradient keeps 2 of the 10 classes' directions per step.
# Picture: $OUT/multi_host.png (gnuplot): bytes per step through the busiest
# host link and step time, per scheme and topology.
# Last line: RESULT key=value ... (see the keys in the summary below).
# With FLOOR=1 (the default) each topology also runs int8_hier with links at
# FLOOR_RATE (100gbit): its CPU-bound time. hier_int8_floor_vs_flat_int8_<t>
# is the larger of that and its bytes' wire time at RATE, over flat int8's
# time: how low hier_int8_comm_vs_flat_int8 could go on this machine.
# Environment: RATE (1gbit), TOPOLOGIES ("2x2 3x2"), SCHEMES, LONG (40),
# SHORT (20), SKIP (12 steps left out of the medians), HIDDEN (2048,2048),
# BATCH (64), BLAS_THREADS (1 OpenBLAS thread per rank: every virtual host
# shares this machine's cores, while the trainer's own default, cores /
# local ranks, would give each host all of them), TRAIN, OUT, ACCURACY=1
# (also one full epoch per scheme on the first topology for the test
# accuracy; long).
set -euo pipefail

RATE=${RATE:-1gbit}
TOPOLOGIES=${TOPOLOGIES:-"2x2 3x2"}
SCHEMES=${SCHEMES:-"allreduce two_level fp16 int8 int8_hier powersgd2"}
LONG=${LONG:-40}
SHORT=${SHORT:-20}
SKIP=${SKIP:-12}
HIDDEN=${HIDDEN:-2048,2048}
BATCH=${BATCH:-64}
BLAS_THREADS=${BLAS_THREADS:-1}
FLOOR=${FLOOR:-1}
FLOOR_RATE=${FLOOR_RATE:-100gbit}
psgd_start=10  # the timed runs' (see above); the epoch run sets its own

die() { echo "multi_host: $*" >&2; exit 1; }
[ "$(id -u)" = 0 ] || die "needs root (tools/virtual_cluster makes namespaces); run with sudo"
[ "$SKIP" -ge "$psgd_start" ] || die "SKIP=$SKIP must be at least $psgd_start (PowerSGD's first compressed step)"
. "$(dirname "$0")/trainer.sh" 2>/dev/null ||
  . "$0.runfiles/ddpx/examples/benchmarks/trainer.sh"  # here, workspace, TRAIN
vc=$workspace/tools/virtual_cluster
[ -x "$vc" ] || die "tools/virtual_cluster not found under $workspace"
free_port=$(built_binary examples/benchmarks/free_port) ||
  die "free_port not found; bazel build //examples/benchmarks:free_port"
comm_time=$here/comm_time.py
[ -f "$comm_time" ] || comm_time=$0.runfiles/ddpx/examples/benchmarks/comm_time.py
OUT=${OUT:-$(mktemp -d /tmp/multi_host.XXXXXX)}
mkdir -p "$OUT"
NAME=mh
trap '"$vc" down --name=$NAME >/dev/null 2>&1 || true' EXIT

scheme_flags() {  # scheme -> "ENV=... --hook=..."
  case $1 in
    allreduce) echo "DDPX_GLOO_TWO_LEVEL=0 --hook=allreduce" ;;
    two_level) echo "DDPX_GLOO_TWO_LEVEL=1 --hook=allreduce" ;;
    fp16) echo "DDPX_GLOO_TWO_LEVEL=1 --hook=fp16" ;;
    int8) echo "DDPX_GLOO_TWO_LEVEL=1 --hook=int8" ;;
    int8_hier) echo "DDPX_GLOO_TWO_LEVEL=1 --hook=int8:hierarchical=1" ;;
    powersgd2) echo "DDPX_GLOO_TWO_LEVEL=1 --hook=powersgd:rank=2,start_iter=$psgd_start,min_compression_rate=6" ;;
    *) die "unknown scheme '$1'" ;;
  esac
}

tx_bytes() { "$vc" status --name=$NAME | awk 'NR > 1 { printf "%s ", $3 }'; }

run_job() {  # hosts ranks_per_host scheme steps tag [extra trainer flags...]
  local hosts=$1 per=$2 scheme=$3 steps=$4 tag=$5
  shift 5
  local world=$((hosts * per)) port flags env hook pids=()
  # Free on the store's host (rank 0's), handed to every rank.
  port=$("$vc" run "$NAME-h1" -- "$free_port") || die "$tag: no free port on $NAME-h1"
  flags=$(scheme_flags "$scheme")
  env=${flags%% *}
  hook=${flags#* }
  rm -f "$OUT/$tag".trace.rank* "$OUT/$tag.jsonl"
  for r in $(seq 0 $((world - 1))); do
    local metrics=()
    [ "$r" = 0 ] && metrics=(--metrics_out="$OUT/$tag.jsonl")
    "$vc" run "$NAME-h$((r / per + 1))" -- env "$env" MASTER_ADDR=10.213.0.1 MASTER_PORT=$port \
      RANK=$r WORLD_SIZE=$world LOCAL_RANK=$((r % per)) LOCAL_WORLD_SIZE=$per \
      "$TRAIN" --init=env:// --iface=eth0 --job_id="$tag" $hook --hidden="$HIDDEN" \
      --batch_size="$BATCH" --threads="$BLAS_THREADS" --max_steps="$steps" \
      --log_every=1000 --timeout_s=600 \
      --bucket_cap_mb=100 --first_bucket_cap_mb=100 --comm_trace="$OUT/$tag.trace" \
      "${metrics[@]}" "$@" >"$OUT/$tag.rank$r.log" 2>&1 &
    pids+=($!)
  done
  for r in "${!pids[@]}"; do
    wait "${pids[$r]}" || { tail -5 "$OUT/$tag.rank$r.log"; die "$tag: rank $r failed"; }
  done
}

echo "multi_host: MLP 784-$HIDDEN-10, batch $BATCH per rank, $BLAS_THREADS BLAS thread(s) per rank" \
     "on $(nproc) cores, links $RATE, runs of $SHORT and" \
     "$LONG steps; out $OUT; load average $(cut -d' ' -f1-3 /proc/loadavg)"
summary=$OUT/summary.tsv
: >"$summary"
floor=$OUT/floor.tsv
: >"$floor"
for topo in $TOPOLOGIES; do
  hosts=${topo%x*}
  per=${topo#*x}
  "$vc" down --name=$NAME >/dev/null 2>&1 || true
  "$vc" up --hosts="$hosts" --rate="$RATE" --name=$NAME >/dev/null
  for scheme in $SCHEMES; do
    a=$(tx_bytes)
    run_job "$hosts" "$per" "$scheme" "$SHORT" "${topo}_${scheme}_short"
    b=$(tx_bytes)
    run_job "$hosts" "$per" "$scheme" "$LONG" "${topo}_${scheme}"
    c=$(tx_bytes)
    # The hook's time per bucket (entering the hook to its future
    # completing): it covers collectives on the hook's own subgroups
    # (hierarchical int8), which the per-collective trace does not see.
    read -r _ transfer _ < <(python3 "$comm_time" "$OUT/${topo}_${scheme}.trace" \
      "$((hosts * per))" "$SKIP")
    python3 - "$OUT/${topo}_${scheme}.jsonl" "$SKIP" "$a" "$b" "$c" "$((LONG - SHORT))" \
      "$topo" "$scheme" "$transfer" >>"$summary" <<'PY'
import json, statistics, sys
metrics, skip, a, b, c, steps, topo, scheme, transfer = sys.argv[1:]
step = statistics.median(r["step_time_s"] for r in map(json.loads, open(metrics))
                         if r["type"] == "step" and r["step"] > int(skip))
a, b, c = ([int(x) for x in v.split()] for v in (a, b, c))
per_step = [((c[h] - b[h]) - (b[h] - a[h])) / int(steps) for h in range(len(a))]
print(topo, scheme, step, float(transfer), *per_step, sep="\t")
PY
    tail -1 "$summary" | awk -F'\t' '{ printf "%s %-10s step %7.1f ms  comm %7.1f ms  uplink MB/step:", $1, $2, 1000*$3, 1000*$4; for (i = 5; i <= NF; i++) printf " %.2f", $i / 1e6; print "" }'
  done
  # The hierarchical int8 hook's CPU-bound time: the same job with links
  # FLOOR_RATE fast, where the wire costs next to nothing. Its time at RATE
  # cannot be under this or under its bytes' wire time.
  if [ "$FLOOR" = 1 ] && [[ " $SCHEMES " == *" int8_hier "* ]]; then
    "$vc" down --name=$NAME >/dev/null 2>&1 || true
    "$vc" up --hosts="$hosts" --rate="$FLOOR_RATE" --name=$NAME >/dev/null
    run_job "$hosts" "$per" int8_hier "$LONG" "${topo}_int8_hier_floor"
    read -r _ transfer _ < <(python3 "$comm_time" "$OUT/${topo}_int8_hier_floor.trace" \
      "$((hosts * per))" "$SKIP")
    printf "%s\t%s\n" "$topo" "$transfer" >>"$floor"
    echo "$topo int8_hier  comm ${transfer}s with links at $FLOOR_RATE (its CPU-bound time)"
  fi
done

accuracy=$OUT/accuracy.tsv
: >"$accuracy"
if [ "${ACCURACY:-0}" = 1 ]; then
  topo=${TOPOLOGIES%% *}
  hosts=${topo%x*}
  per=${topo#*x}
  "$vc" down --name=$NAME >/dev/null 2>&1 || true
  "$vc" up --hosts="$hosts" --rate="$RATE" --name=$NAME >/dev/null
  for scheme in $SCHEMES; do
    if [ "$scheme" = powersgd2 ]; then  # 20% of the epoch's steps (above)
      steps=$(sed -n 's/.* \([0-9]*\) steps\/epoch.*/\1/p' "$OUT/${topo}_${scheme}.rank0.log")
      [ -n "$steps" ] || die "no steps/epoch in $OUT/${topo}_${scheme}.rank0.log"
      psgd_start=$(( (steps + 4) / 5 > 2 ? (steps + 4) / 5 : 2 ))
      echo "multi_host: $steps steps per epoch: PowerSGD starts at step $psgd_start"
    fi
    run_job "$hosts" "$per" "$scheme" -1 "${topo}_${scheme}_epoch" --epochs=1 --lr_schedule=cosine
    acc=$(sed -n 's/^done: .* test accuracy \([0-9.]*\)%.*/\1/p' "$OUT/${topo}_${scheme}_epoch.rank0.log")
    printf "%s\t%s\n" "$scheme" "$acc" | tee -a "$accuracy"
  done
fi

# The picture: bytes through the busiest host link and step time, per scheme
# (clusters) and topology (bars).
plot_data=$OUT/plot.dat
python3 - "$summary" >"$plot_data" <<'PY'
import collections, sys
rows = [l.rstrip("\n").split("\t") for l in open(sys.argv[1]) if l.strip()]
topos = list(dict.fromkeys(r[0] for r in rows))
by = collections.OrderedDict()
for topo, scheme, step, _, *up in rows:
    by.setdefault(scheme, {})[topo] = (max(map(float, up)) / 1e6, 1e3 * float(step))
print("scheme", *[f"{t}" for t in topos], *[f"{t}" for t in topos])  # hosts x ranks
for scheme, v in by.items():
    print(scheme, *[f"{v[t][0]:.3f}" if t in v else "?" for t in topos],
          *[f"{v[t][1]:.1f}" if t in v else "?" for t in topos])
PY
topo_count=$(echo $TOPOLOGIES | wc -w)
if command -v gnuplot >/dev/null; then
  gnuplot <<GP && echo "multi_host: picture $OUT/multi_host.png"
set terminal pngcairo size 1100,420 font ",10" noenhanced
set output "$OUT/multi_host.png"
set multiplot layout 1,2 title "MLP 784-$HIDDEN-10 on virtual hosts, $RATE per host link"
set style data histogram
set style histogram clustered gap 1
set style fill solid 0.8 border -1
set key autotitle columnhead top right
set xtics rotate by -30
set grid ytics
set yrange [0:*]
set ylabel "MB per step through the busiest host link"
plot for [i=2:$((topo_count + 1))] "$plot_data" using i:xtic(1)
set ylabel "median step time (ms)"
plot for [i=$((topo_count + 2)):$((2 * topo_count + 1))] "$plot_data" using i:xtic(1)
unset multiplot
GP
else
  echo "multi_host: no gnuplot (tools/setup installs gnuplot-nox): no picture"
fi

model_bytes=$(sed -n 's/.*(\([0-9]*\) parameters).*/\1/p' "$OUT"/*.rank0.log | head -1)
python3 - "$summary" "$accuracy" "$((model_bytes * 4))" "$RATE" "$floor" <<'PY'
import collections, re, sys
summary, accuracy, M, rate, floor = sys.argv[1], sys.argv[2], int(sys.argv[3]), sys.argv[4], sys.argv[5]
m = re.fullmatch(r"([0-9.]+)([kmg]?)bit", rate)
link = float(m.group(1)) * {"": 1, "k": 1e3, "m": 1e6, "g": 1e9}[m.group(2)] / 8  # bytes/s
rows = [line.rstrip("\n").split("\t") for line in open(summary) if line.strip()]
res = collections.OrderedDict()
worst_ideal, worst_wire = 0.0, 0.0
comm, wire_time = {}, {}
print(f"\nM = {M / 1e6:.2f} MB of float32 gradients; link {rate}")
print(f"{'topology':8} {'scheme':10} {'step ms':>8} {'comm ms':>8} {'busiest MB':>10} {'ideal MB':>9} {'/ideal':>7} {'/bound':>7} {'comm/wire':>9}")
for topo, scheme, step, transfer, *uplinks in rows:
    H, L = map(int, topo.split("x"))
    W = H * L
    up = max(map(float, uplinks))
    B = 2 * (H - 1) / H * M
    header = 8
    if scheme == "two_level":
        ideal = B
    elif scheme == "fp16":
        ideal = B / 2
    elif scheme == "int8":
        ideal = (L * (W - L) + W - 1) * (M / 4 / W + header)
    elif scheme == "int8_hier":
        ideal = 2 * L * (H - 1) * (M / 4 / (L * H) + header)
    else:
        ideal = None
    wire = up / link
    key = f"{topo}_{scheme}"
    comm[key] = float(transfer)
    wire_time[key] = wire
    ratio = up / ideal if ideal else float("nan")
    print(f"{topo:8} {scheme:10} {1e3 * float(step):8.1f} {1e3 * float(transfer):8.1f} {up / 1e6:10.2f} "
          f"{(ideal or 0) / 1e6:9.2f} {ratio:7.3f} {up / B:7.3f} {float(transfer) / wire:9.2f}")
    if ideal:
        worst_ideal = max(worst_ideal, ratio)
    if scheme != "powersgd2":
        worst_wire = max(worst_wire, float(transfer) / wire)
    if topo == "3x2" and scheme == "two_level":
        res["hier_allreduce_uplink_vs_bound"] = up / B
    if topo == "3x2" and scheme == "allreduce":
        res["flat_allreduce_uplink_vs_bound"] = up / B
    if scheme == "int8_hier":
        res["hier_int8_uplink_vs_bound"] = max(res.get("hier_int8_uplink_vs_bound", 0), up / B)
res["uplink_vs_ideal_max"] = worst_ideal
res["comm_vs_wire_max"] = worst_wire
def worst(a, b):
    vals = [comm[f"{t}_{a}"] / comm[f"{t}_{b}"] for t in {k.split("_")[0] for k in comm}
            if f"{t}_{a}" in comm and f"{t}_{b}" in comm]
    return max(vals) if vals else None
for key, a, b in (("hier_int8_comm_vs_flat_int8", "int8_hier", "int8"),
                  ("fp16_comm_vs_allreduce", "fp16", "allreduce"),
                  ("two_level_comm_vs_allreduce", "two_level", "allreduce")):
    v = worst(a, b)
    if v is not None:
        res[key] = v
for t in sorted({k.split("_")[0] for k in comm}):
    for s in ("powersgd2", "allreduce"):
        if f"{t}_{s}" in comm:
            res[f"{'powersgd' if s == 'powersgd2' else s}_comm_ms_{t}"] = 1e3 * comm[f"{t}_{s}"]
# The floor of hierarchical int8's time: its bytes' wire time or its
# CPU-bound time, whichever is longer; over flat int8's time.
for line in open(floor):
    t, cpu_only = line.split()
    if f"{t}_int8_hier" in comm and f"{t}_int8" in comm:
        res[f"hier_int8_cpu_only_ms_{t}"] = 1e3 * float(cpu_only)
        res[f"hier_int8_floor_vs_flat_int8_{t}"] = (
            max(float(cpu_only), wire_time[f"{t}_int8_hier"]) / comm[f"{t}_int8"])
names = {"allreduce": "allreduce", "two_level": "hier_allreduce", "fp16": "fp16", "int8": "int8",
         "int8_hier": "hier_int8", "powersgd2": "powersgd2"}
for line in open(accuracy):
    scheme, acc = line.split()
    res[f"{names[scheme]}_test_acc"] = float(acc) / 100
print("RESULT " + " ".join(f"{k}={v:.3f}" for k, v in res.items()))
PY

