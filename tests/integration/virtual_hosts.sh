# Sourced by the tests that run a job on virtual hosts: `virtual_hosts_up
# PREFIX WHAT` finds tools/virtual_cluster (sets $vc and $tools), skips the
# test loudly (exit 0, saying WHAT was not tested) where network namespaces
# cannot be made (not root), else brings up two 1 Gbit/s hosts named
# $name-h1 and $name-h2 (sets $name) and takes them down when the test exits.
virtual_hosts_up() {
  local prefix=$1 what=$2
  tools=tools
  [ -x "$tools/virtual_cluster" ] || tools="$(dirname "$(readlink -f "$0")")/../../tools"
  vc=$tools/virtual_cluster
  [ -x "$vc" ] || { echo "FAIL: tools/virtual_cluster not found (PWD=$PWD)"; exit 1; }
  name=$prefix$(( $$ % 100000 ))
  if [ "$(id -u)" != 0 ] || ! ip netns add "$name-probe" 2>/dev/null; then
    echo "SKIPPED LOUDLY: no network namespaces here (needs root): $what was NOT tested"
    exit 0
  fi
  ip netns del "$name-probe"
  trap '"$vc" down --name="$name" >/dev/null 2>&1 || true' EXIT
  "$vc" up --hosts=2 --rate=1gbit --name="$name"
}
