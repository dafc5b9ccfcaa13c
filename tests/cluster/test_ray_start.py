"""The one Ray starter (ncdoc.cluster.ray_start): a local instance is reachable from this machine only.

Read from /proc: every TCP socket in LISTEN state held by this process (the driver) or one it
started (GCS, raylet, agents, workers) must be bound to a loopback address. Ray, asked for
127.0.0.1, binds its servers to every interface unless the starter stops it."""

import os
from pathlib import Path

import pytest

from ncdoc.cluster import ray_nodes
from ncdoc.tuner import dispatch

# /proc/net/tcp{,6} local addresses (hex, as the kernel prints them) that are loopback only
LOOPBACK = ("0100007F", "00000000000000000000000001000000", "0000000000000000FFFF00000100007F")


def _parents() -> dict[int, int]:
    out = {}
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                out[int(entry.name)] = int((entry / "stat").read_text().rsplit(")", 1)[1].split()[1])
            except (OSError, IndexError, ValueError):
                pass
    return out


def _family(root: int) -> set[int]:
    parents = _parents()
    found, todo = {root}, [root]
    while todo:
        me = todo.pop()
        for pid, ppid in parents.items():
            if ppid == me and pid not in found:
                found.add(pid)
                todo.append(pid)
    return found


def _socket_inodes(pids) -> dict[str, int]:
    out = {}
    for pid in pids:
        try:
            fds = os.listdir(f"/proc/{pid}/fd")
        except OSError:
            continue
        for fd in fds:
            try:
                target = os.readlink(f"/proc/{pid}/fd/{fd}")
            except OSError:
                continue
            if target.startswith("socket:["):
                out[target[8:-1]] = pid
    return out


def _listening(inodes) -> list[tuple[str, int]]:
    """(local address:port in hex, pid) of every listening TCP socket among `inodes`."""
    out = []
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        try:
            lines = Path(table).read_text().splitlines()[1:]
        except OSError:
            continue
        for line in lines:
            f = line.split()
            if len(f) > 9 and f[3] == "0A" and f[9] in inodes:
                out.append((f[1], inodes[f[9]]))
    return out


@pytest.mark.ray
def test_a_local_instance_listens_on_loopback_only(ray_runtime):
    if not Path("/proc/net/tcp").exists():
        pytest.skip("needs Linux /proc to read listening sockets")

    @ray_runtime.remote
    def pid():
        return os.getpid()

    ray_runtime.get([pid.remote() for _ in range(2)])          # a worker is up too
    listening = _listening(_socket_inodes(_family(os.getpid())))
    assert len({p for _, p in listening}) >= 2, listening       # at least the GCS and the raylet
    exposed = [(addr, open(f"/proc/{p}/cmdline").read().replace("\0", " ")[:100])
               for addr, p in listening if addr.rsplit(":", 1)[0] not in LOOPBACK]
    assert not exposed, exposed


def test_the_launcher_and_the_tuner_start_ray_the_same_way():
    """One starter: neither the Ray launcher nor the tuner's dispatch calls ray.init itself."""
    for module in (ray_nodes, dispatch):
        text = Path(module.__file__).read_text()
        assert "ray.init(" not in text and "ray_start import start" in text, module.__name__
