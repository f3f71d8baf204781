#!/usr/bin/env bash
# `bazel run //python:install [-- PIP_ARGS]`: pip-installs the ddpx_torch
# wheel Bazel built into the python3 that tools/setup gave torch ($PYTHON
# if set). Extra arguments go to pip (e.g. --target DIR, --user).
set -euo pipefail
wheel=$(ls "$(dirname "$0")"/ddpx_torch-*.whl 2>/dev/null | head -1 || true)
if [ -z "$wheel" ]; then
  wheel=$(ls python/ddpx_torch-*.whl | head -1)
fi
PY=${PYTHON:-python3}
# Without pip's dependency resolution: the wheel requires the torch it was
# built with, which tools/setup installed (and pip must not replace).
$PY -m pip install --no-deps --force-reinstall "$wheel" "$@" ||
  $PY -m pip install --no-deps --force-reinstall --break-system-packages "$wheel" "$@"
[ $# -gt 0 ] && exit 0  # installed elsewhere (--target ...): nothing to check here
$PY -c "import torch, torch.distributed as d; assert 'ddpx' in d.Backend.backend_list; \
print('ddpx_torch installed: init_process_group(\"ddpx\") works in', torch.__file__.rsplit('/', 2)[0])"
