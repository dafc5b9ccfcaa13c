"""The one place ncdoc starts or joins Ray: the cluster launchers and the tuner's dispatch both call `start`.

    started = start(address)                       # join a running cluster (--ray-address)
    started = start(None, num_cpus=4, resources=...)   # a private local instance

A private instance is bound to the loopback interface and has no dashboard: nothing on it is
reachable from another machine. Ray does not do that by itself: asked for 127.0.0.1 it swaps in
the machine's routable address ("so that other nodes can reach it") and its servers listen on
every interface. Ray keeps the loopback address only where it thinks clusters are not supported
(its RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER switch, read once at import into ray_constants), so for
the start that switch is turned off, in this process and in the environment Ray's own processes
inherit, and restored afterwards. `address="local"` makes the instance private even where a
`ray start` runs on this machine or RAY_ADDRESS is set.
"""

from __future__ import annotations

import contextlib
import logging
import os

from ncdoc.errors import RunnerError, UsageError

LOOPBACK = "127.0.0.1"
_SWITCH = "RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER"


def _ray():
    try:
        import ray
    except ImportError:
        raise UsageError("ray is not installed: pip install 'ray[default]' (or use --launcher slurm / mpirun)") \
            from None
    return ray


@contextlib.contextmanager
def _loopback_only():
    """Ray's cluster switch off while it starts (see the module docstring)."""
    before = os.environ.get(_SWITCH)
    os.environ[_SWITCH] = "0"
    constants = None
    try:
        from ray._private import ray_constants as constants
        saved = constants.ENABLE_RAY_CLUSTER
        constants.ENABLE_RAY_CLUSTER = False
    except (ImportError, AttributeError):          # another Ray layout: the environment switch alone
        constants = None
    try:
        yield
    finally:
        if constants is not None:
            constants.ENABLE_RAY_CLUSTER = saved
        if before is None:
            os.environ.pop(_SWITCH, None)
        else:
            os.environ[_SWITCH] = before


def start(address: str | None = None, *, num_cpus: int | None = None, resources: dict | None = None) -> bool:
    """Make Ray usable in this process. True when this call started it (the caller shuts it down),
    False when it was running already. `address`: join that cluster; None: a private local instance."""
    ray = _ray()
    if ray.is_initialized():
        return False
    # Ray logs a notice about its token authentication at every start; not ncdoc's user's concern.
    logging.getLogger("ray").setLevel(logging.ERROR)
    kw = dict(include_dashboard=False, log_to_driver=False, logging_level="ERROR")
    try:
        if address:
            ray.init(address=address, **kw)
        else:
            with _loopback_only():
                ray.init(address="local", num_cpus=num_cpus or max(2, os.cpu_count() or 2),
                         _node_ip_address=LOOPBACK, resources=dict(resources or {}), **kw)
    except ConnectionError as exc:
        raise RunnerError(f"cannot join the Ray cluster at {address}", cause=str(exc)) from None
    return True


__all__ = ["start", "LOOPBACK"]
