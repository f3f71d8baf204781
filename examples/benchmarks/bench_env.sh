# Sourced by the benchmark scripts once they have defined `die` (trainer.sh
# sources it for those that run //examples:train):
#   . "$(dirname "$0")/bench_env.sh" 2>/dev/null ||
#     . "$0.runfiles/ddpx/examples/benchmarks/bench_env.sh"
# Sets `here` (the script's directory) and `workspace` (the source tree:
# `bazel run`'s BUILD_WORKSPACE_DIRECTORY, else two levels above `here`),
# and defines built_binary and run_anchor.
here=$(cd "$(dirname "$0")" && pwd)
workspace=${BUILD_WORKSPACE_DIRECTORY:-$(cd "$here/../.." && pwd)}

# built_binary PATH: the built binary of the workspace path PATH (e.g.
# examples/launcher/launch), looked for in `bazel run`'s runfiles, in the
# output tree beside the built script and in the workspace's .bazel/bin;
# fails, printing nothing, if it is not built.
built_binary() {
  local candidate
  for candidate in "${RUNFILES_DIR:-/nonexistent}/ddpx/$1" "$0.runfiles/ddpx/$1" \
                   "$here/../../$1" "$workspace/.bazel/bin/$1"; do
    [ -f "$candidate" ] && [ -x "$candidate" ] && echo "$candidate" && return 0
  done
  return 1
}

# run_anchor [--copies=N] LABEL PREFIX CMD...: runs an anchor, the
# reference job a benchmark measures ddpx against (PyTorch DDP over gloo,
# ...), with --metrics_out=PREFIX.jsonl appended and its output in
# PREFIX.log; with --copies=N, N copies at once (the floors that load the
# machine as the real job does), copy k with PREFIX_k.jsonl and PREFIX_k.log.
# An anchor that fails (any copy) is run once more, whole and from fresh
# metrics files, and the retry is printed: a flake of the reference (one
# Python DDP run died with SIGABRT in its third round) must not cost the
# whole comparison. Returns 1 if both attempts failed, its metrics removed:
# the caller leaves that run out of its figures and its RESULT line says so.
# Each attempt's output stays in PREFIX[_k].attemptA.log. Every retry and
# failure is also a line of $OUT/anchor_events, which anchor_counts turns
# into the RESULT line's anchor_retries and anchor_failures.
# Only ddpx's own runs are never retried: their failure is a result.
# Tests: DDPX_BENCH_BREAK_ANCHOR=first (or always) appends
# --ddpx_bench_broken_on_purpose to the first attempt (or to both), a flag
# the anchor refuses, so the retry path runs against the real anchor.
run_anchor() {
  local copies=1
  case "$1" in --copies=*) copies=${1#--copies=}; shift ;; esac
  local label=$1 prefix=$2 attempt k failed
  shift 2
  local prefixes=("$prefix")
  if [ "$copies" != 1 ]; then
    prefixes=()
    for k in $(seq 1 "$copies"); do prefixes+=("${prefix}_$k"); done
  fi
  for attempt in 1 2; do
    local cmd=("$@")
    case "${DDPX_BENCH_BREAK_ANCHOR:-}" in
      always) cmd+=(--ddpx_bench_broken_on_purpose) ;;
      first) [ "$attempt" = 1 ] && cmd+=(--ddpx_bench_broken_on_purpose) ;;
    esac
    local pids=() statuses=()
    for k in "${!prefixes[@]}"; do
      rm -f "${prefixes[$k]}.jsonl"
      "${cmd[@]}" --metrics_out="${prefixes[$k]}.jsonl" >"${prefixes[$k]}.attempt$attempt.log" 2>&1 &
      pids+=($!)
    done
    failed=0
    for k in "${!pids[@]}"; do
      statuses[$k]=0
      wait "${pids[$k]}" || { statuses[$k]=$?; failed=1; }
      cp "${prefixes[$k]}.attempt$attempt.log" "${prefixes[$k]}.log"
    done
    [ "$failed" = 0 ] && return 0
    for k in "${!prefixes[@]}"; do
      local status=${statuses[$k]} log=${prefixes[$k]}.attempt$attempt.log
      [ "$status" = 0 ] && continue
      local how="exit status $status"
      [ "$status" -gt 128 ] && how+=" (signal $(kill -l $((status - 128)) 2>/dev/null || echo $((status - 128))))"
      echo "anchor failed: $label, attempt $attempt of 2, $how; last lines of $log:"
      tail -5 "$log" | sed 's/^/    /'
    done
    if [ "$attempt" = 1 ]; then
      echo "anchor retry: $label, once more"
      echo "retry $label" >>"$OUT/anchor_events"
    fi
  done
  echo "anchor failed twice: $label; this run is left out of the figures"
  echo "failed $label" >>"$OUT/anchor_events"
  for k in "${!prefixes[@]}"; do rm -f "${prefixes[$k]}.jsonl"; done
  return 1
}

# anchor_counts: "anchor_retries=R anchor_failures=F" for the RESULT line.
anchor_counts() {
  local retries=0 failures=0
  if [ -f "$OUT/anchor_events" ]; then
    retries=$(grep -c '^retry ' "$OUT/anchor_events" || true)
    failures=$(grep -c '^failed ' "$OUT/anchor_events" || true)
  fi
  echo "anchor_retries=$retries anchor_failures=$failures"
}
