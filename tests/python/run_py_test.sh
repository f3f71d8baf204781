#!/usr/bin/env bash
# Runs one Python test of this folder against the ddpx_torch Bazel built
# (//python:ddpx_torch in the runfiles), with the python3 torch lives in
# (or $PYTHON): run_py_test.sh tests/python/X_test.py [ARGS].
set -euo pipefail
root="${TEST_SRCDIR:?run by bazel test}/ddpx"
export PYTHONPATH="$root/python:$root/tests/python${PYTHONPATH:+:$PYTHONPATH}"
# The wheel's entry point is for installed copies (packaging_test); here the
# tests import ddpx_torch themselves.
export TORCH_DEVICE_BACKEND_AUTOLOAD=0
export PYTHONDONTWRITEBYTECODE=1
case "${DDPX_SANITIZER:-}" in
  asan)
    # ASan's runtime must come first in the process; python3 is not built
    # with it, so it is preloaded, and libstdc++ with it (python3 does not
    # link it, and ASan's __cxa_throw interceptor needs the real one at
    # start). CPython and torch keep memory until exit on purpose: leak
    # reports would be theirs.
    export LD_PRELOAD="$(g++ -print-file-name=libasan.so):$(g++ -print-file-name=libstdc++.so.6)${LD_PRELOAD:+:$LD_PRELOAD}"
    export ASAN_OPTIONS="${ASAN_OPTIONS:+$ASAN_OPTIONS:}detect_leaks=0"
    ;;
  tsan)
    echo "SKIPPED under --config=tsan: ThreadSanitizer cannot run an extension inside an" \
         "uninstrumented python3 (it sees none of the GIL's synchronization; every torch" \
         "object handed between Python and ddpx's threads would be reported). The ddpx code" \
         "this backend calls runs under TSan in //tests/process_group." >&2
    exit 0
    ;;
esac
exec "${PYTHON:-python3}" "$root/$1" "${@:2}"
