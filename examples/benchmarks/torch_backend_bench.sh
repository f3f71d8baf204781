#!/usr/bin/env bash
# Runs torch_backend_bench.py (ddpx's dist.all_reduce vs Gloo's, and ddpx's
# torch.ops.ddpx.all_reduce_world_ vs DeepSpeed's inference_all_reduce_, from
# Python; see its docstring) with the ddpx_torch package Bazel built
# (//python:ddpx_torch in the runfiles) and the python3 torch lives in (or
# $PYTHON). Arguments go to the script:
#
#   bazel run -c opt //examples/benchmarks:torch_backend_bench
set -euo pipefail
runfiles="${RUNFILES_DIR:-$0.runfiles}/ddpx"
export PYTHONPATH="$runfiles/python${PYTHONPATH:+:$PYTHONPATH}"
# The wheel's torch.backends entry point is for an installed copy; the
# script imports ddpx_torch itself.
export TORCH_DEVICE_BACKEND_AUTOLOAD=0
exec "${PYTHON:-python3}" "$runfiles/examples/benchmarks/torch_backend_bench.py" "$@"
