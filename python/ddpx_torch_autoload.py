"""The `torch.backends` entry point of the ddpx_torch wheel.

torch's __init__ calls load() for every installed entry point of that group
(torch._import_device_backends) and turns any exception into a failed
`import torch`. A ddpx_torch built for another torch version must not take
torch down with it: load() then warns in one line and registers a "ddpx"
backend whose creation raises that line, so init_process_group("ddpx")
says what is wrong.
"""

import warnings


def load():
    try:
        import ddpx_torch  # noqa: F401  (registers the backend)
    except ImportError as err:
        message = str(err)
        if "was built with torch" not in message:
            raise
        warnings.warn(message, RuntimeWarning, stacklevel=2)

        import torch.distributed as dist

        def refuse(*args, **kwargs):
            raise RuntimeError(message)

        dist.Backend.register_backend("ddpx", refuse, extended_api=True, devices=["cpu"])
