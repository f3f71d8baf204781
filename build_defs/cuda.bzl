"""Building CUDA code with nvcc from /usr/local/cuda, only under --config=cuda.

`cuda_library` compiles each `.cu` file with nvcc in a genrule (one object per
file, sm_80 and sm_90 SASS) and hands the objects to a cc_library, so the
rest of the build links them like any C++ object. Verified on this machine
kind: the objects link into cc_test/cc_binary targets with `-lcudart`.

Without --config=cuda every target made here, and every target that uses
`cuda_only()`, is incompatible: `bazel build //...` and `bazel test //...`
skip them and never look for nvcc or the CUDA headers.
"""

load("@rules_cc//cc:defs.bzl", "cc_library")

NVCC = "/usr/local/cuda/bin/nvcc"

# Ampere and Hopper; add a pair here to support another architecture.
NVCC_GENCODES = [
    "-gencode arch=compute_80,code=sm_80",
    "-gencode arch=compute_90,code=sm_90",
]

NVCC_FLAGS = [
    "-c",
    "-O2",
    "-std=c++17",
    "-Xcompiler -fPIC",
    "--expt-relaxed-constexpr",
]

def cuda_only():
    """target_compatible_with value: compatible only under --config=cuda."""
    return select({
        "//build_defs:cuda": [],
        "//conditions:default": ["//build_defs:incompatible"],
    })

def cuda_library(name, cu_srcs = [], srcs = [], hdrs = [], cu_hdrs = [], deps = [], **kwargs):
    """A cc_library whose `cu_srcs` are compiled by nvcc.

    Args:
      name: the cc_library's name.
      cu_srcs: .cu files; each becomes `<name>_<file>.pic.o`.
      srcs: ordinary C++ sources (compiled by the C++ toolchain).
      hdrs: public headers of the library.
      cu_hdrs: headers the .cu files include (workspace-relative paths); they
        must be listed because nvcc runs in Bazel's sandbox.
      deps: cc_library dependencies; @cuda//:cudart is added.
      **kwargs: passed to cc_library.
    """
    objects = []
    for cu in cu_srcs:
        stem = cu.replace("/", "_").replace(".cu", "")
        obj = "%s_%s.pic.o" % (name, stem)
        native.genrule(
            name = "%s_%s_nvcc" % (name, stem),
            srcs = [cu] + hdrs + cu_hdrs,
            outs = [obj],
            # -I. is the execroot: headers are included by workspace path.
            cmd = " ".join([NVCC] + NVCC_FLAGS + NVCC_GENCODES + [
                "-I.",
                "-I$(GENDIR)",
                "-o $@",
                "$(location %s)" % cu,
            ]),
            target_compatible_with = cuda_only(),
            tags = ["cuda"],
        )
        objects.append(obj)
    cc_library(
        name = name,
        srcs = srcs + objects,
        hdrs = hdrs,
        deps = deps + ["@cuda//:cudart"],
        target_compatible_with = cuda_only(),
        **kwargs
    )
