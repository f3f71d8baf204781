"""gloo_test: a C++ test of the Gloo backend, `name` + ".cc", on the test
main, by default with the rank threads of gloo_test_util."""

load("@rules_cc//cc:defs.bzl", "cc_test")

def gloo_test(name, size = "small", deps = [":gloo_test_util"]):
    cc_test(
        name = name,
        size = size,
        srcs = [name + ".cc"],
        deps = deps + ["//tests:test_main"],
    )
