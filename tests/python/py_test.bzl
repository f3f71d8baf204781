"""ddpx_torch_py_test: a Python test of tests/python against //python's
package, run by run_py_test.sh; ddpx_torch_ddp_test: one of the tests that
train with torch's DDP or FSDP on ddp_common.py's model and data."""

def ddpx_torch_py_test(name, src = None, args = [], extra_srcs = [], data = [], size = "medium", **kwargs):
    """`src` defaults to `name` + ".py"."""
    src = src or name + ".py"
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

# What ddp_common.py loads: the MLP and training run of
# examples/reference/train_torch.py and its residual CNN.
DDP_COMMON_DATA = [
    "//examples:reference/residual_cnn.py",
    "//examples:reference/train_torch.py",
]

def ddpx_torch_ddp_test(name, data = [], **kwargs):
    """A large ddpx_torch_py_test with ddp_common.py and its data."""
    ddpx_torch_py_test(
        name = name,
        size = "large",
        data = DDP_COMMON_DATA + data,
        extra_srcs = ["ddp_common.py"],
        **kwargs
    )
