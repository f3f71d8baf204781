#!/usr/bin/env bash
# Builds and runs the consumer workspace against this checkout, proving that
# another Bazel workspace can depend on @ddpx//:process_group.
# Usage: tests/consumer/run.sh   (from anywhere; .ci/run calls it)
set -euo pipefail
cd "$(dirname "$0")"
# A separate output base: this workspace's server must not share the main
# workspace's lock.
output_base="${DDPX_CONSUMER_OUTPUT_BASE:-${HOME}/.cache/bazel_ddpx_consumer}"
bazel --output_base="${output_base}" run --jobs=2 //:consumer

# Only the public targets are visible to another workspace.
refusal="$(bazel --output_base="${output_base}" build --jobs=2 //:reaches_internal 2>&1 || true)"
if ! grep -q "is not visible from target" <<<"${refusal}"; then
  echo "consumer: FAILED: @ddpx//process_group/gloo is visible to another workspace" >&2
  echo "${refusal}" | tail -5 >&2
  exit 1
fi
echo "consumer: internal targets are not visible: OK"
