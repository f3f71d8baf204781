#!/usr/bin/env bash
# docs/multi_host.md's SLURM example, run as written: `srun -N 2
# --ntasks-per-node=2 .bazel/bin/examples/train ...` across two virtual
# hosts, from a folder that holds the trainer at that relative path (the
# checkout's root for a user; here a tree in the test's temporary folder
# with links to the trainer and tools/). tools/slurm_local runs slurmctld on
# the first host of a tools/virtual_cluster and a slurmd on each; the tasks
# start in the folder srun was called from, as on a real cluster (--chdir
# overrides it), and the trainer's 4 ranks read SLURM's variables
# (--init=env://), bind the hosts' eth0 (--iface) and train, two ranks per
# host. Skips loudly where network namespaces cannot be made (not root);
# fails where SLURM is missing (tools/setup installs it).
set -euo pipefail
train=$PWD/examples/train
doc=docs/multi_host.md  # runfiles, as examples/train
[ -f "$doc" ] || { echo "FAIL: docs/multi_host.md not found (PWD=$PWD)"; exit 1; }
if ! command -v srun >/dev/null || ! command -v munged >/dev/null; then
  echo "FAIL: slurm-wlm/munge not installed (tools/setup installs them)"; exit 1
fi

# The example: the ```sh block that runs tools/slurm_local, its
# backslash-continued lines joined.
example=$(awk '/^```sh$/ { block = ""; inside = 1; next }
  /^```$/ { if (inside && block ~ /tools\/slurm_local run/) print block; inside = 0; next }
  inside { block = block $0 "\n" }' "$doc" | sed -e ':a' -e '/\\$/N; s/\\\n[[:space:]]*//; ta')
up_line=$(grep '^tools/virtual_cluster up' <<<"$example" || true)
run_line=$(grep '^tools/slurm_local run' <<<"$example" || true)
[ "$up_line" = "tools/virtual_cluster up --hosts=2" ] ||
  { echo "$example"; echo "FAIL: the example's first line is not 'tools/virtual_cluster up --hosts=2'"; exit 1; }
[[ "$run_line" =~ ^tools/slurm_local\ run\ --virtual-cluster=vc\ --\ srun\ [A-Za-z0-9_./=:\ -]+$ ]] ||
  { echo "$example"; echo "FAIL: the example's srun line is not a plain 'tools/slurm_local run --virtual-cluster=vc -- srun ...'"; exit 1; }
echo "docs/multi_host.md's example: $up_line; $run_line"

. "$(dirname "$0")/virtual_hosts.sh"
virtual_hosts_up s "srun across hosts"  # the example's `up`, under a name of this test's own
[ -x "$tools/slurm_local" ] || { echo "FAIL: tools/slurm_local not found"; exit 1; }

# The folder the example runs from.
root=$TEST_TMPDIR/checkout
mkdir -p "$root/.bazel/bin/examples" "$root/sub"
ln -sfn "$(readlink -f "$tools")" "$root/tools"
ln -sfn "$(readlink -f "$train")" "$root/.bazel/bin/examples/train"
cd "$root"

# Where the tasks start: in srun's folder on both hosts, or --chdir's.
out=$(tools/slurm_local run --virtual-cluster="$name" -- bash -c \
  'cd sub && srun -N 2 --ntasks-per-node=1 pwd && echo --- && srun -N 2 --ntasks-per-node=1 --chdir=/tmp pwd' \
  2>"$TEST_TMPDIR/pwd.err") || { cat "$TEST_TMPDIR/pwd.err"; echo "$out"; echo "FAIL: srun pwd failed"; exit 1; }
echo "$out"
[ "$out" = "$(printf '%s\n%s\n---\n/tmp\n/tmp' "$root/sub" "$root/sub")" ] ||
  { echo "FAIL: the tasks did not start in srun's folder $root/sub (or --chdir's /tmp) on both hosts"; exit 1; }

# The example as written (its cluster name ours), with flags that keep the
# training short.
read -r -a words <<<"${run_line/--virtual-cluster=vc /--virtual-cluster=$name }"
out=$("${words[@]}" --hidden=256 --batch_size=32 --train_limit=4096 --epochs=1 --log_every=1000 \
  --timeout_s=60 2>&1) || { echo "$out"; echo "FAIL: the srun job failed"; exit 1; }
echo "$out"
grep -q "4 ranks x batch 32" <<<"$out" || { echo "FAIL: not a 4-rank job"; exit 1; }
grep -q "go in two levels across 2 hosts x 2 ranks" <<<"$out" ||
  { echo "FAIL: SLURM did not place two ranks on each of the two hosts"; exit 1; }
acc=$(sed -n 's/^done: .* test accuracy \([0-9.]*\)%.*/\1/p' <<<"$out")
[ -n "$acc" ] || { echo "FAIL: no final accuracy"; exit 1; }
awk -v a="$acc" 'BEGIN { exit !(a > 50) }' || { echo "FAIL: accuracy $acc% <= 50%"; exit 1; }
echo "PASS: docs/multi_host.md's srun -N 2 --ntasks-per-node=2 (relative trainer path) across two virtual hosts trained to $acc%"
