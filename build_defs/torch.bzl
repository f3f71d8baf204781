"""Targets that include libtorch's headers.

torch 2.15's headers refuse C++17, so these (and only these) compile with
-std=c++20; the rest of the tree keeps the C++17 of .bazelrc. Each macro
adds @torch//:libtorch. Keep such translation units few: each one costs tens
of seconds to compile on two cores.

Without torch (third_party/torch.bzl found none) every target made here is
incompatible and `bazel build //...` / `bazel test //...` skip it.
Under --config=tsan they are skipped as well (see TORCH_TSAN_NOTE).
"""

load("@rules_cc//cc:defs.bzl", "cc_binary", "cc_library", "cc_test")

TORCH_COPTS = ["-std=c++20"]

def _torch_kwargs(kwargs):
    kwargs["copts"] = TORCH_COPTS + kwargs.get("copts", [])
    kwargs["deps"] = kwargs.get("deps", []) + ["@torch//:libtorch"]
    return kwargs

def torch_cc_library(**kwargs):
    cc_library(**_torch_kwargs(kwargs))

def torch_cc_binary(**kwargs):
    cc_binary(**_torch_kwargs(kwargs))

def torch_cc_test(**kwargs):
    cc_test(**_torch_kwargs(kwargs))
