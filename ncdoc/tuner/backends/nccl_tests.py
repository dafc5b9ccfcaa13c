"""The `nccl-tests` backend: each measurement runs the nccl-tests binaries (all_reduce_perf, ...).

Single node: `<coll>_perf -b MIN -e MAX -f 2 -g N` with the step's environment, given to the
benchmark process itself (the Ray worker that starts it is reused). Several nodes: one process
per GPU through mpirun (`mpirun -np N -H h1:G,h2:G -x NCCL_...=...`),
the hosts given with --hosts or, on a Ray cluster, the node group's gang of nodes. Output
is parsed with ncdoc's nccl-tests parser; a run that exits non-zero, reports wrong results,
or outlives its timeout fails the trial with the reason (its last output lines). A tuner table
is loaded the way a job would load it: NCCL_TUNER_PLUGIN (--tuner-plugin) and
NCCL_TUNER_CONFIG_FILE pointing at the rules written for the step.

The child runs in its own session and with PR_SET_PDEATHSIG: when the Ray worker that
launched it is force-killed (a hung trial), the benchmark dies with it instead of holding
the GPUs.
"""

from __future__ import annotations

import ctypes
import os
import signal
import subprocess
from pathlib import Path
from typing import Any, Mapping, Sequence

from ncdoc.errors import UsageError
from ncdoc.tuner.backends import (Backend, Measurement, RunContext, SizeResult, TrialFailed, Workload,
                                  nearest)
from ncdoc.tuner.space import Hardware

_PR_SET_PDEATHSIG = 1


def binary_name(collective: str) -> str:
    return f"{collective}_perf"


_LIBC: Any = None


def _die_with_parent() -> None:
    """Runs in the child between fork and exec: only the prctl call (libc was loaded before the fork)."""
    if _LIBC:
        _LIBC.prctl(_PR_SET_PDEATHSIG, signal.SIGKILL)


def _load_libc() -> None:
    global _LIBC
    if _LIBC is None:
        try:
            _LIBC = ctypes.CDLL("libc.so.6", use_errno=True)
        except OSError:
            _LIBC = False


def _fmt(n: int) -> str:
    return str(int(n))


def parse_rows(text: str) -> dict[int, tuple[float, float, float, int | None]]:
    """Size -> (out-of-place busbw, in-place busbw, time us, #wrong) from nccl-tests stdout,
    read with ncdoc's nccl-tests parser (ncdoc.evidence.nccl_tests)."""
    try:
        from ncdoc.evidence.nccl_tests import parse_nccl_tests
    except ImportError:                           # the evidence package is optional for the tuner
        return _parse_rows_minimal(text)
    out: dict[int, tuple[float, float, float, int | None]] = {}
    for row in parse_nccl_tests(text.splitlines(), source="nccl-tests").rows:
        oop, ip = row.oop, row.ip
        if not row.complete or oop is None or oop.busbw is None:
            continue
        wrongs = [g.wrong for g in (oop, ip) if g is not None and g.wrong is not None]
        out[row.size] = (oop.busbw, ip.busbw if ip is not None and ip.busbw is not None else oop.busbw,
                         oop.time_us or 0.0, int(sum(wrongs)) if wrongs else None)
    return out


def _num(tok: str) -> float | None:
    try:
        return float(tok)
    except ValueError:
        return None


def _parse_rows_minimal(text: str) -> dict[int, tuple[float, float, float, int | None]]:
    """The data rows of nccl_facts 5.3: size count type redop root, then time algbw busbw #wrong twice."""
    out = {}
    for line in text.splitlines():
        if line.lstrip().startswith("#") or not line.strip():
            continue
        f = line.split()
        if len(f) < 13 or not f[0].isdigit():
            continue
        t, oop, inp = _num(f[5]), _num(f[7]), _num(f[11])
        if oop is None:
            continue
        wrong = sum(int(w) for w in (f[8], f[12]) if w.isdigit()) if any(w.isdigit() for w in (f[8], f[12])) else None
        out[int(f[0])] = (oop, inp if inp is not None else oop, t or 0.0, wrong)
    return out


class NcclTestsBackend(Backend):
    name = "nccl-tests"

    def __init__(self, tests_dir: str | None, *, hardware: Hardware, base_env: Mapping[str, str] | None = None,
                 gpus_per_node: int | None = None, hosts: Sequence[str] = (), mpirun: str = "mpirun",
                 iters: int = 20, warmup: int = 5, expectation: Any = None, collectives: Sequence[str] = (),
                 tuner_plugin: str | None = None, table_dir: str | None = None):
        self.tests_dir = str(Path(tests_dir).resolve()) if tests_dir else None
        self.hw = hardware
        self.base_env = dict(base_env or {})
        self.gpus = gpus_per_node or hardware.gpus_per_node
        self.nodes = hardware.nodes
        self.hosts = tuple(hosts)
        self.mpirun = mpirun
        self.iters, self.warmup = iters, warmup
        self._expectation = expectation
        # Several nodes without explicit hosts: the dispatcher reserves one Ray node per host.
        self.gang_size = self.nodes if self.nodes > 1 and not self.hosts else 1
        self.tuner_plugin = str(Path(tuner_plugin).resolve()) if tuner_plugin else None
        # Tables are written here for the benchmark to load: on shared storage when hosts are remote.
        self.table_dir = str(Path(table_dir).resolve()) if table_dir else None
        for c in collectives:
            self.binary(c)                      # fail at startup, not in every trial

    def table_support(self) -> str | None:
        from ncdoc.tuner.table import plugin_problem
        return plugin_problem(self.tuner_plugin)

    def _with_table(self, env: Mapping[str, str], table: Sequence[Any]) -> dict[str, str]:
        """The step's env, plus what makes NCCL load `table` through the example plugin."""
        if not table:
            return dict(env)
        why = self.table_support()
        if why:
            raise TrialFailed(f"cannot load the tuner table: {why}", kind="tool")
        from ncdoc.tuner.table import plugin_env
        return {**env, **plugin_env(table, str(self.tuner_plugin), self.table_dir)}

    def binary(self, collective: str) -> str:
        name = binary_name(collective)
        if self.tests_dir:
            path = Path(self.tests_dir) / name
            if not (path.is_file() and os.access(path, os.X_OK)):
                raise UsageError(f"nccl-tests binary {name} not found (or not executable) in {self.tests_dir}; "
                                 "build nccl-tests and pass --nccl-tests-dir DIR (its build/ folder)")
            return str(path)
        from shutil import which
        found = which(name)
        if not found:
            raise UsageError(f"nccl-tests binary {name} is not on PATH; pass --nccl-tests-dir DIR")
        return found

    def describe(self) -> dict[str, Any]:
        return {"backend": self.name, "nodes": self.nodes, "gpus_per_node": self.gpus, "fabric": self.hw.fabric,
                "hosts": list(self.hosts), "tests_dir": self.tests_dir}

    def command(self, collective: str, sizes: Sequence[int], env: Mapping[str, str],
                hosts: Sequence[str] = ()) -> list[str]:
        """The command line for one run; with several hosts, an mpirun line exporting the NCCL env."""
        args = [self.binary(collective), "-b", _fmt(min(sizes)), "-e", _fmt(max(sizes)), "-f", "2",
                "-n", str(self.iters), "-w", str(self.warmup), "-c", "1"]
        if len(hosts) <= 1 and self.nodes <= 1:
            return args + ["-g", str(self.gpus)]
        hosts = list(hosts) or [f"node{i}" for i in range(self.nodes)]
        cmd = [self.mpirun, "-np", str(len(hosts) * self.gpus), "-H", ",".join(f"{h}:{self.gpus}" for h in hosts),
               "--bind-to", "none"]
        for name in sorted(env):
            cmd += ["-x", f"{name}={env[name]}"]
        for name in ("PATH", "LD_LIBRARY_PATH"):
            if name in os.environ:
                cmd += ["-x", name]
        return cmd + args + ["-g", "1"]

    def _process_env(self, env: Mapping[str, str]) -> dict[str, str]:
        out = {k: v for k, v in os.environ.items() if not k.startswith("NCCL_")}
        out.update(env)
        return out

    def run_once(self, collective: str, sizes: Sequence[int], env: Mapping[str, str], *, timeout_s: float | None,
                 hosts: Sequence[str] = ()) -> str:
        cmd = self.command(collective, sizes, env, hosts or self.hosts)
        _load_libc()
        try:
            proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                                    env=self._process_env(env), start_new_session=True,
                                    preexec_fn=_die_with_parent)
        except OSError as exc:
            raise TrialFailed(f"cannot start {cmd[0]}: {exc.strerror or exc}", kind="tool") from None
        try:
            out, _ = proc.communicate(timeout=timeout_s)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            out, _ = proc.communicate()
            raise TrialFailed(f"{binary_name(collective)} gave no result within {timeout_s:g} s (hung); killed. "
                              + _tail(out), kind="hang") from None
        if proc.returncode != 0:
            sig = -proc.returncode if proc.returncode < 0 else None
            what = f"was killed by signal {signal.Signals(sig).name}" if sig else f"exited with {proc.returncode}"
            raise TrialFailed(f"{binary_name(collective)} {what}. {_tail(out)}", kind="crash" if sig else "call")
        return out

    def measure(self, env: Mapping[str, str], workload: Workload, repeat_index: int, *,
                timeout_s: float | None = None, context: RunContext | None = None,
                table: Sequence[Any] = ()) -> Measurement:
        hosts = context.hosts if context and context.hosts and not self.hosts else self.hosts
        env = self._with_table(env, table)
        rows = []
        for collective, sizes in workload:
            text = self.run_once(collective, sizes, env, timeout_s=timeout_s, hosts=hosts)
            parsed = parse_rows(text)
            if not parsed:
                raise TrialFailed(f"{binary_name(collective)} printed no result rows. {_tail(text)}", kind="call")
            picked = nearest(sizes, parsed)
            missing = [s for s in sizes if s not in picked]
            if missing:
                raise TrialFailed(f"{binary_name(collective)} printed no row for size(s) {missing}", kind="call")
            wrong = [s for s in sizes if picked[s][3]]
            if wrong:
                raise TrialFailed(f"{binary_name(collective)} reported wrong results at size(s) {wrong} "
                                  "(data corruption with these settings)", kind="call")
            rows.append((collective, tuple(SizeResult(size=s, busbw=picked[s][0], time_us=picked[s][2])
                                           for s in sizes)))
        return Measurement(tuple(rows))


def _tail(text: str | None, n: int = 4) -> str:
    lines = [ln for ln in (text or "").splitlines() if ln.strip()]
    warn = [ln for ln in lines if "WARN" in ln or "error" in ln.lower()]
    keep = (warn or lines)[-n:]
    return ("Last output: " + " | ".join(ln.strip()[:200] for ln in keep)) if keep else "No output."
