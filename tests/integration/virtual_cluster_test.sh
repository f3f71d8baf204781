#!/usr/bin/env bash
# Two virtual hosts (tools/virtual_cluster: their own network, UTS, IPC and
# mount namespaces, 1 Gbit/s veths on one bridge) run a 4-rank training job,
# two ranks each, started per rank with --init=env:// as on real machines:
# host 1's ranks name their interface with PyTorch's GLOO_SOCKET_IFNAME,
# host 2's with the trainer's --iface. Checks the job trains, its bytes
# cross both hosts' links, the hosts are told apart, a wrong interface name
# fails with the list of interfaces, and `down` leaves nothing behind.
# Skips loudly where network namespaces cannot be made (not root).
set -euo pipefail
train=$PWD/examples/train
. "$(dirname "$0")/virtual_hosts.sh"
virtual_hosts_up t "the multi-host job"

h1=$("$vc" run "$name-h1" -- hostname)
h2=$("$vc" run "$name-h2" -- hostname)
[ "$h1" = "$name-h1" ] && [ "$h2" = "$name-h2" ] || { echo "FAIL: host names '$h1' '$h2'"; exit 1; }

port=$(( 20000 + $$ % 20000 ))
pids=()
for r in 0 1 2 3; do
  host="$name-h$(( r / 2 + 1 ))"
  iface_env=GLOO_SOCKET_IFNAME=eth0 iface_flag=
  [ $r -ge 2 ] && iface_env=UNUSED=1 iface_flag=--iface=eth0
  "$vc" run "$host" -- env MASTER_ADDR=10.213.0.1 MASTER_PORT=$port RANK=$r WORLD_SIZE=4 \
    LOCAL_RANK=$(( r % 2 )) LOCAL_WORLD_SIZE=2 "$iface_env" \
    "$train" --init=env:// $iface_flag --job_id=vc --hidden=256 --batch_size=32 --train_limit=4096 --epochs=1 \
    --log_every=1000 --timeout_s=60 >"$TEST_TMPDIR/rank$r.log" 2>&1 &
  pids+=($!)
done
for r in 0 1 2 3; do
  wait "${pids[$r]}" || { cat "$TEST_TMPDIR/rank$r.log"; echo "FAIL: rank $r failed"; exit 1; }
done
cat "$TEST_TMPDIR/rank0.log"
grep -q "4 ranks" "$TEST_TMPDIR/rank0.log" || { echo "FAIL: not a 4-rank job"; exit 1; }
# The 0.8 MB bucket crosses the hosts in two levels (docs/multi_host.md).
grep -q "go in two levels across 2 hosts x 2 ranks" "$TEST_TMPDIR/rank0.log" ||
  { echo "FAIL: the two-level allreduce is not on"; exit 1; }
acc=$(sed -n 's/^done: .* test accuracy \([0-9.]*\)%.*/\1/p' "$TEST_TMPDIR/rank0.log")
[ -n "$acc" ] || { echo "FAIL: no final accuracy"; exit 1; }
awk -v a="$acc" 'BEGIN { exit !(a > 50) }' || { echo "FAIL: accuracy $acc% <= 50%"; exit 1; }

"$vc" status --name="$name" | tee "$TEST_TMPDIR/status"
for h in 1 2; do
  tx=$(awk -v h="$name-h$h" '$1 == h { print $3 }' "$TEST_TMPDIR/status")
  [ "${tx:-0}" -gt 100000 ] || { echo "FAIL: host $h sent only ${tx:-0} bytes over its link"; exit 1; }
done

if out=$("$vc" run "$name-h1" -- env MASTER_ADDR=10.213.0.1 MASTER_PORT=$((port + 1)) RANK=0 \
    WORLD_SIZE=1 "$train" --init=env:// --iface=eth9 --hidden=16 --max_steps=1 2>&1); then
  echo "FAIL: a wrong interface name was accepted"; exit 1
fi
grep -q "eth9" <<<"$out" && grep -q "eth0 10.213.0.1" <<<"$out" ||
  { echo "$out"; echo "FAIL: the error does not name eth9 and list eth0 10.213.0.1"; exit 1; }

"$vc" down --name="$name"
trap - EXIT
if ip -o link show | grep -q "$name-" || ip netns list | grep -q "^$name-"; then
  echo "FAIL: down left interfaces or namespaces of $name"; exit 1
fi
echo "PASS: 4 ranks on 2 virtual hosts trained to $acc%; wrong interface refused; nothing left"
