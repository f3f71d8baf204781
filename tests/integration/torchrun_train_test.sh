#!/usr/bin/env bash
# The trainer under torchrun: ranks join the elastic agent's own TCPStore
# (TORCHELASTIC_USE_AGENT_STORE) and train. Skips (passing, with a message)
# where torch is not importable by python3 on PATH.
set -euo pipefail
train=examples/train
python=${DDPX_TORCH_PYTHON:-python3}
if ! "$python" -c 'import torch.distributed.run' 2>/dev/null; then
  echo "FAIL: torch is not importable by $python (tools/setup installs it; or set DDPX_TORCH_PYTHON)"; exit 1
fi
out=$("$python" -m torch.distributed.run --no-python --nproc-per-node=2 "$train" \
  --init=env:// --hidden=128 --batch_size=32 --max_steps=200 --log_every=100 2>&1) || {
  echo "$out"; echo "FAIL: the torchrun job failed"; exit 1; }
echo "$out"
grep -q "2 ranks x batch 32" <<<"$out" || { echo "FAIL: not a 2-rank job"; exit 1; }
acc=$(sed -n 's/^done: 200 steps, test accuracy \([0-9.]*\)%.*/\1/p' <<<"$out")
awk -v a="${acc:-0}" 'BEGIN { exit !(a > 70) }' || { echo "FAIL: accuracy '$acc'"; exit 1; }
echo "PASS: torchrun trained to $acc%"
