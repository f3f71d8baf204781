#!/usr/bin/env bash
# Runs torch_backend_bench.py (torch.distributed from Python on "ddpx" vs
# Gloo vs DeepSpeed's shared-memory allreduce; see its docstring) with the
# ddpx_torch package Bazel built (//python:ddpx_torch in the runfiles) and
# the python3 torch lives in (or $PYTHON). Arguments go to the script:
#
#   bazel run //examples/benchmarks:torch_backend_bench -- --rounds 5
set -euo pipefail
runfiles="${RUNFILES_DIR:-$0.runfiles}/ddpx"
export PYTHONPATH="$runfiles/python${PYTHONPATH:+:$PYTHONPATH}"
# The wheel's torch.backends entry point is for an installed copy; the
# script imports ddpx_torch itself.
export TORCH_DEVICE_BACKEND_AUTOLOAD=0
exec "${PYTHON:-python3}" "$runfiles/examples/benchmarks/torch_backend_bench.py" "$@"
