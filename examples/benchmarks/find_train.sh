# Sourced by the benchmark scripts: find_train WORKSPACE sets TRAIN to the
# trainer binary (a TRAIN the user set wins), looking in `bazel run`'s
# runfiles, beside the built script and in the workspace's .bazel/bin, and
# otherwise dies saying how to build it. Uses the caller's `die` and `here`
# (the script's directory).
find_train() {
  local workspace=$1 t
  if [ -z "${TRAIN:-}" ]; then
    for t in "${RUNFILES_DIR:-/nonexistent}/ddpx/examples/train" "$here/../train" \
             "$workspace/.bazel/bin/examples/train"; do
      [ -x "$t" ] && TRAIN=$t && break
    done
  fi
  [ -x "${TRAIN:-}" ] || die "trainer not found; bazel build //examples:train or set TRAIN=/path/to/train"
}
