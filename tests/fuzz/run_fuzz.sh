#!/bin/bash
# Builds the TCPStore frame-decoder fuzzer with clang + libFuzzer + ASan/UBSan
# (outside Bazel) and runs it for SECONDS (default 60) on the seed corpus.
#   tests/fuzz/run_fuzz.sh 60
set -euo pipefail
SECONDS_TO_RUN="${1:-60}"
ROOT="$(cd "$(dirname "$0")/../.." && pwd)"
OUT="${FUZZ_OUT:-${TMPDIR:-/tmp}/ddpx_fuzz}"
CXX="${CXX_FUZZ:-$(command -v clang++-14 || command -v clang++)}"
mkdir -p "$OUT/corpus"
cp -n "$ROOT"/tests/fuzz/corpus/frame_decoder/* "$OUT/corpus/" 2>/dev/null || true

# Debian's Abseil is built with GCC against libstdc++, which clang uses too.
"$CXX" -std=c++17 -O1 -g -fsanitize=fuzzer,address,undefined \
  -fno-sanitize-recover=undefined -I"$ROOT" \
  "$ROOT/tests/fuzz/frame_decoder_fuzzer.cc" "$ROOT/store/protocol.cc" \
  -labsl_str_format_internal -labsl_strings -labsl_strings_internal \
  -labsl_int128 -labsl_throw_delegate -labsl_raw_logging_internal \
  -o "$OUT/frame_decoder_fuzzer"

echo "fuzzing the frame decoder for ${SECONDS_TO_RUN}s (corpus: $OUT/corpus)"
# New inputs go to $OUT/corpus; the checked-in seeds stay as they are.
"$OUT/frame_decoder_fuzzer" -max_total_time="$SECONDS_TO_RUN" -max_len=4096 \
  -print_final_stats=1 -artifact_prefix="$OUT/" "$OUT/corpus"
