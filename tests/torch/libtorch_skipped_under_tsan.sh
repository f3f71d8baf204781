#!/usr/bin/env bash
# Runs only under --config=tsan, where the libtorch targets are skipped.
cat <<'MSG'
tests/torch (and examples/torch, reducer/torch) are skipped under --config=tsan:
ThreadSanitizer cannot see the synchronization inside the uninstrumented
libtorch_cpu.so and libgomp.so and reports races whose both sides are torch
code (an OpenMP worker's memcpy against the main thread's free; torch's lazily
created CPU generator). Suppressing by library would also hide races in ddpx's
autograd hooks, which run under libtorch frames. They run under --config=asan
(ASan + UBSan) and in the default build. See build_defs/torch.bzl.
MSG
