"""A tiny deterministic benchmark for testing the study machinery (not a shipped backend).

busbw = 100 GB/s x (1.30 if 4 QPs, 1.15 if 2 QPs) x (1.10 if an 8 MiB buffer) x (0.6 with
NCCL_CROSS_NIC=0, clearly worse); NCCL_CROSS_NIC=1 changes nothing; NCCL_IB_TC=1 "fails" the
way NCCL refuses a setting; every run carries +-0.3 % of deterministic noise keyed on the
repeat index.
"""

import hashlib
import time

from ncdoc.tuner.backends import Backend, Measurement, SizeResult, TrialFailed
from ncdoc.tuner.space import Hardware

SPACE = """\
schema_version: 1
name: toy
fabric: ib
variables:
  NCCL_IB_QPS_PER_CONNECTION: {values: [unset, 2, 4], default: 1}
  NCCL_BUFFSIZE: {values: [unset, 8388608]}
  NCCL_CROSS_NIC: {values: [unset, 0, 1]}
  NCCL_IB_TC: {values: [unset, 1]}
"""


def toy_busbw(env, size, repeat_index):
    bw = 100.0
    bw *= {"4": 1.30, "2": 1.15}.get(env.get("NCCL_IB_QPS_PER_CONNECTION", ""), 1.0)
    bw *= 1.10 if env.get("NCCL_BUFFSIZE") == "8388608" else 1.0
    bw *= 0.6 if env.get("NCCL_CROSS_NIC") == "0" else 1.0
    h = hashlib.sha256(repr((sorted(env.items()), size, repeat_index)).encode()).digest()
    return bw * (1.0 + 0.003 * (h[0] / 127.5 - 1.0))


class ToyBackend(Backend):
    name = "toy"

    def __init__(self, base_env=None, delay_s=0.0, hang_on=None):
        self.base_env = dict(base_env or {})
        self.delay_s = delay_s
        self.hang_on = hang_on or {}
        self.calls = 0
        self.in_process_ok = not self.hang_on      # nothing to live through: no worker needed

    def hardware(self):
        return Hardware(fabric="ib", nodes=2, gpus_per_node=8, nics_per_node=8, nvswitch=True, nvls=True, sm=90,
                        nccl_version="2.30.7")

    def baseline_env(self):
        return dict(self.base_env)

    def describe(self):
        return {"backend": self.name}

    def measure(self, env, workload, repeat_index, *, timeout_s=None, context=None, table=()):
        self.calls += 1
        if self.delay_s:
            time.sleep(self.delay_s)
        for k, v in self.hang_on.items():
            if env.get(k) == v:
                while True:
                    time.sleep(3600)
        if env.get("NCCL_IB_TC") == "1":
            raise TrialFailed("NCCL WARN toy: traffic class 1 refused", kind="init")
        rows = tuple((c, tuple(SizeResult(size=s, busbw=toy_busbw(env, s, repeat_index), algo="Ring", proto="Simple",
                                          nchannels=16) for s in sizes)) for c, sizes in workload)
        return Measurement(rows)


class EnvEchoBackend(Backend):
    """Reports its worker's pid (as algo), NCCL_TOY_BW from the worker's os.environ (as busbw) and
    NCCL_TOY_BW from the env measure() was given (as proto)."""

    name = "env-echo"

    def __init__(self, delay_s=0.0, fresh=True):
        self.delay_s = delay_s
        self.needs_fresh_process = fresh

    def hardware(self):
        return Hardware(fabric="ib", nodes=1, gpus_per_node=8)

    def measure(self, env, workload, repeat_index, *, timeout_s=None, context=None, table=()):
        import os
        if self.delay_s:
            time.sleep(self.delay_s)
        bw = float(os.environ.get("NCCL_TOY_BW", "1"))
        rows = tuple((c, tuple(SizeResult(size=s, busbw=bw, algo=str(os.getpid()), proto=env.get("NCCL_TOY_BW", ""),
                                          nchannels=1) for s in sizes)) for c, sizes in workload)
        return Measurement(rows)


class BarrierBackend(Backend):
    """Each measurement waits until `parties` measurements have arrived (files in `folder`): they
    finish only when that many run at the same time."""

    name = "barrier"

    def __init__(self, folder, parties=2, patience_s=50.0):
        self.folder, self.parties, self.patience_s = folder, parties, patience_s

    def hardware(self):
        return Hardware(fabric="ib", nodes=1, gpus_per_node=8)

    def measure(self, env, workload, repeat_index, *, timeout_s=None, context=None, table=()):
        import os
        import uuid
        open(os.path.join(self.folder, uuid.uuid4().hex), "w").close()
        end = time.monotonic() + self.patience_s
        while len(os.listdir(self.folder)) < self.parties:
            if time.monotonic() > end:
                raise TrialFailed("the other measurement never arrived", kind="call")
            time.sleep(0.05)
        return Measurement(tuple((c, tuple(SizeResult(size=s, busbw=1.0) for s in sizes)) for c, sizes in workload))


# `python -c SLOW_SIM_CLI tune ...` runs ncdoc with every simulated measurement lasting 50 ms: a simulated
# trial takes milliseconds, so a whole tune can end between two looks at its study; tests that must find
# trials running (to interrupt them, or to meet a held lock) start it this way. How fast trials are is no concern.
SLOW_SIM_CLI = ("import sys, time\n"
                "from ncdoc.tuner.backends.sim import SimBackend\n"
                "measure = SimBackend.measure\n"
                "def slow(self, *a, **k):\n"
                "    time.sleep(0.05)\n"
                "    return measure(self, *a, **k)\n"
                "SimBackend.measure = slow\n"
                "from ncdoc.cli.main import main\n"
                "sys.exit(main(sys.argv[1:]))\n")


def drain(executor) -> dict:
    """Every result an executor still owes, by job key (waits until nothing is in flight)."""
    out = {}
    while executor.in_flight():
        for res in executor.wait():
            out[res.key] = res
    return out
