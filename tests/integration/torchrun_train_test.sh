#!/usr/bin/env bash
# A trainer under torchrun: ranks join the elastic agent's own TCPStore
# (TORCHELASTIC_USE_AGENT_STORE) and train.
#
#   torchrun_train_test.sh TRAINER STEPS MIN_ACCURACY [TRAINER FLAGS...]
#
# TRAINER (examples/train or examples/torch/train, as the BUILD rule's args
# give it) runs STEPS steps on 2 ranks and must end above MIN_ACCURACY
# percent. Fails where torch is not importable by python3 on PATH.
set -euo pipefail
. "$(dirname "$0")/two_rank_job.sh"
trainer=$PWD/$1 steps=$2 min_acc=$3
shift 3
python=${DDPX_TORCH_PYTHON:-python3}
if ! "$python" -c 'import torch.distributed.run' 2>/dev/null; then
  echo "FAIL: torch is not importable by $python (tools/setup installs it; or set DDPX_TORCH_PYTHON)"; exit 1
fi
out=$("$python" -m torch.distributed.run --no-python --nproc-per-node=2 "$trainer" \
  --init=env:// --max_steps="$steps" "$@" 2>&1) || {
  echo "$out"; echo "FAIL: the torchrun job failed"; exit 1; }
echo "$out"
expect_two_rank_job "$out" "$steps" "$min_acc" "torchrun"
