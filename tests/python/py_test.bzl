"""ddpx_torch_py_test: a Python test of tests/python against //python's
package, run by run_py_test.sh."""

def ddpx_torch_py_test(name, src, args = [], extra_srcs = [], data = [], size = "medium", **kwargs):
    native.sh_test(
        name = name,
        size = size,
        srcs = ["run_py_test.sh"],
        args = ["tests/python/" + src] + args,
        data = [src, "harness.py", "//python:ddpx_torch"] + extra_srcs + data,
        # Sanitizer builds of the extension run inside an uninstrumented
        # python3: run_py_test.sh preloads ASan's runtime, and says why it
        # cannot run them under TSan.
        env = select({
            "//tests/python:asan": {"DDPX_SANITIZER": "asan"},
            "//build_defs:tsan": {"DDPX_SANITIZER": "tsan"},
            "//conditions:default": {},
        }),
        # Ranks are processes with torch in each; two of them at once on a
        # two-core machine is what the timeouts are sized for.
        tags = ["cpu:2"],
        **kwargs
    )
