# Sourced by the elastic shell tests: host_loss_test.sh and
# slurm_elastic_test.sh on virtual hosts, after
# tests/integration/virtual_hosts.sh's virtual_hosts_up (which sets $vc and
# $name), and store_loss_test.sh (last_step, wait_step). The job's store is
# served by //store:tcp_store_server, outside every rank (docs/elastic.md);
# on virtual hosts, on the first host, which the ranks reach at its address.

# Under --config=tsan the programs these tests start get the suppressions
# every C++ test hands its children (tests/tsan_options.cc).
tsan_options=$("$PWD/tests/tsan_options")
[ -z "$tsan_options" ] || export TSAN_OPTIONS="$tsan_options"

store_addr=10.213.0.1  # $name-h1's eth0 (tools/virtual_cluster)

# start_store PORT: serves the store on $name-h1 until the test exits.
start_store() {
  local port=$1 log=$TEST_TMPDIR/store.log
  "$vc" run "$name-h1" -- "$PWD/store/tcp_store_server" --port="$port" >"$log" 2>&1 &
  store_pid=$!
  trap 'kill "$store_pid" 2>/dev/null || true; "$vc" down --name="$name" >/dev/null 2>&1 || true' EXIT
  for _ in $(seq 1 500); do
    grep -q "listening on port" "$log" 2>/dev/null && return 0
    kill -0 "$store_pid" 2>/dev/null || break
    sleep 0.02
  done
  cat "$log"; echo "FAIL: the store did not start on $name-h1:$port"; exit 1
}

# last_step FILE: the largest "step" of FILE's step lines (0 when none).
last_step() {
  awk 'match($0, /"type":"step","epoch":[0-9]+,"step":[0-9]+/) {
         s = substr($0, RSTART, RLENGTH); sub(/.*"step":/, "", s); if (s + 0 > m) m = s + 0 }
       END { print m + 0 }' "$1" 2>/dev/null || echo 0
}

# wait_step FILE STEP PID: until FILE has a step line >= STEP; fails when
# PID ended first or after 120 s.
wait_step() {
  local deadline=$((SECONDS + 120))
  while [ "$(last_step "$1")" -lt "$2" ]; do
    kill -0 "$3" 2>/dev/null || { echo "FAIL: the job ended before step $2"; return 1; }
    [ $SECONDS -lt $deadline ] || { echo "FAIL: no step $2 within 120 s"; return 1; }
    sleep 0.02
  done
}

# expect_equal_checksums TEXT N: TEXT has N "member M rank R: parameters
# crc32c X" lines, all with the same X.
expect_equal_checksums() {
  local sums
  sums=$(sed -n 's/^member [0-9]* rank [0-9]*: parameters crc32c \(0x[0-9a-f]*\)$/\1/p' <<<"$1")
  [ "$(wc -l <<<"$sums")" = "$2" ] && [ -n "$sums" ] ||
    { echo "FAIL: expected $2 parameter checksums, got: $sums"; exit 1; }
  [ "$(sort -u <<<"$sums" | wc -l)" = 1 ] ||
    { echo "FAIL: the ranks' parameters differ: $sums"; exit 1; }
}

# expect_reformed_on N TEXT: the job's metrics ($metrics) hold one
# membership change, to N ranks, and TEXT (the ranks' output) a "done:"
# line on N ranks and N equal parameter checksums.
expect_reformed_on() {
  local change
  change=$(grep '"type":"membership"' "$metrics" || true)
  echo "$change"
  [ "$(wc -l <<<"$change")" = 1 ] && grep -q "\"world_size\":$1," <<<"$change" ||
    { echo "FAIL: not one membership change to $1 ranks"; exit 1; }
  grep -q "done: .* $1 ranks at the end" <<<"$2" || { echo "FAIL: no 'done:' line on $1 ranks"; exit 1; }
  expect_equal_checksums "$2" "$1"
}
