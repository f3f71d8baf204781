"""Targets that include libtorch's headers.

torch 2.15's headers refuse C++17, so these (and only these) compile with
-std=c++20; the rest of the tree keeps the C++17 of .bazelrc. Each macro
adds @torch//:libtorch. Keep such translation units few: each one costs tens
of seconds to compile on two cores.

Without torch (third_party/torch.bzl found none) every target made here is
incompatible and `bazel build //...` / `bazel test //...` skip it.

They build and run under every configuration. --config=asan (ASan and
UBSan) works with the uninstrumented library. Under --config=tsan,
ThreadSanitizer cannot see the synchronization inside the uninstrumented
libtorch_cpu.so and libgomp.so; tests/tsan_suppressions.cc names the torch
functions whose lazily built singletons and OpenMP hand-offs it misreads,
and //tests/torch:tsan_sees_hook_races_test checks that a race in an
autograd hook (where ddpx's DDP runs) is still reported. Under
--config=cuda they also link torch's CUDA half (@torch//:libtorch_cuda), and
the wrapper takes CUDA modules.
"""

load("@rules_cc//cc:defs.bzl", "cc_binary", "cc_library", "cc_test")

TORCH_COPTS = ["-std=c++20"]

# Library load order for executables that link libtorch. The dynamic
# linker binds every reference to the first library in load order that
# defines the name, and libtorch_cpu.so exports names other libraries here
# also define:
# - its own copy of Gloo (a newer one, for torch.distributed), under the same
#   names as Debian's libgloo, which ddpx's Gloo backend uses. Loaded after
#   libtorch, ddpx's backend and libgloo itself would run on torch's Gloo:
#   other class layouts, a crash in the first connect. So libgloo.so.0 comes
#   first. The cost: torch's own c10d Gloo process group cannot be used in
#   such a process (ddpx's process groups replace it).
# - MKL's Fortran BLAS (sgemm_, ...), which OpenBLAS (ddpx's PowerSGD and the
#   MLP) also defines. Loaded after OpenBLAS, torch's own GEMMs (its 1x1
#   convolutions, linear layers) would run on OpenBLAS: other rounding than
#   torch in Python, and another thread pool. So libtorch comes before
#   OpenBLAS; ddpx calls OpenBLAS through cblas_sgemm/cblas_sgemv, which
#   libtorch does not export.
# An executable's own link flags come before its dependencies' on Bazel's
# link line, and `-L` applies to every `-l` wherever it stands (the torch
# folder's -L comes from @torch//:libtorch), so these fix the order.
# //tests/torch:load_order_test checks which library each shared name binds
# to in a binary linked this way.
TORCH_EXECUTABLE_LINKOPTS = [
    "-Wl,--push-state,--no-as-needed",
    "-lgloo",
    "-ltorch_cpu",
    "-lc10",
    "-Wl,--pop-state",
]

def torch_cuda_deps():
    """Under --config=cuda: the CUDA half of torch (DDPX_TORCH_CUDA defined,
    libtorch_cuda.so loaded so torch can make CUDA tensors)."""
    return select({
        "//build_defs:cuda": ["@torch//:libtorch_cuda"],
        "//conditions:default": [],
    })

def _torch_kwargs(kwargs, executable = False):
    kwargs["copts"] = TORCH_COPTS + kwargs.get("copts", [])
    kwargs["deps"] = kwargs.get("deps", []) + ["@torch//:libtorch"] + torch_cuda_deps()
    if executable:
        kwargs["linkopts"] = TORCH_EXECUTABLE_LINKOPTS + kwargs.get("linkopts", [])
    return kwargs

def torch_cc_library(**kwargs):
    cc_library(**_torch_kwargs(kwargs))

def torch_cc_binary(**kwargs):
    cc_binary(**_torch_kwargs(kwargs, executable = True))

def torch_cc_test(**kwargs):
    cc_test(**_torch_kwargs(kwargs, executable = True))
