"""A simulated fabric with injected faults, for the isolation logic and the stand-in benchmarks.

    spec = FabricSpec.from_dict({"nodes": 64, "faults": {"node07": {"net": 0.5},
                                                         "node11": {"rails": {"mlx5_3": 0.5}},
                                                         "node20": {"flap": 0.5}, "node33": {"gdr": false}}})
    Fabric(spec).busbw(("node01", "node02"))              # all-reduce busbw of a 2-node ring, GB/s
    Fabric(spec).busbw(("node01", "node02"), rail="mlx5_3")   # one NIC per node (NCCL_IB_HCA)

The model is the one ncdoc holds measurements against (ncdoc.nccl.bandwidth): on one node the
NVLink figure of the GPU generation; across nodes a ring reaches 92 % of the aggregate rail
rate, and because NCCL stripes its channels over the rails, the whole ring moves at the pace
of its slowest rail (nrails x the slowest rail). A node without GPUDirect RDMA stages through
host memory (0.45 of its network rate); a flapping node drops to `flap_factor` on a fraction
`flap` of runs. Measurements carry +-2 % noise, a function of the seed, the group and the run.

Faults also say how the node misbehaves when launched (`agent`, `perf`: hang | crash |
lose-rank; `ignore_env`: variables its NCCL never sees; `down`: the node is gone): the
stand-in srun, mpirun and nccl-tests executables of the test suite read the same spec.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass, field

from ncdoc.errors import InputError

RING_EFFICIENCY = 0.92          # as ncdoc.nccl.bandwidth
NO_GDR_FACTOR = 0.45
FAULT_KEYS = {"net", "nvlink", "rails", "gdr", "flap", "flap_factor", "agent", "perf", "ignore_env", "down"}
SPEC_KEYS = {"nodes", "gpus_per_node", "rails", "nic_gbps", "gpu", "nccl_version", "nvlink_busbw", "faults", "seed",
             "noise"}


@dataclass(frozen=True)
class NodeFault:
    net: float = 1.0                  # network factor of the whole node (a slow NIC, a straggler host)
    nvlink: float = 1.0               # intra-node factor
    rails: dict = field(default_factory=dict)   # rail NIC -> factor (a cable trained at half rate)
    gdr: bool = True                  # False: GPUDirect RDMA off, transfers staged through host memory
    flap: float = 0.0                 # probability per run that the node's links drop
    flap_factor: float = 0.3
    agent: str = ""                   # stand-in agent: hang | crash | garbage | slow:<s>
    perf: str = ""                    # stand-in nccl-tests: hang | crash | lose-rank
    ignore_env: tuple[str, ...] = ()  # variables the node's NCCL never reports
    down: bool = False                # the node is gone (the launcher reports a node failure)


@dataclass(frozen=True)
class FabricSpec:
    nodes: tuple[str, ...]
    gpus_per_node: int = 8
    rails: tuple[str, ...] = ("mlx5_0", "mlx5_3", "mlx5_4", "mlx5_5", "mlx5_6", "mlx5_9", "mlx5_10", "mlx5_11")
    nic_gbps: float = 400.0
    gpu: str = "NVIDIA H100 80GB HBM3"
    nccl_version: str = "2.21.5"
    nvlink_busbw: float = 476.0       # ncdoc.nccl.bandwidth NVLINK_FIGURES["H100"]
    faults: dict = field(default_factory=dict)    # node -> NodeFault
    seed: int = 0
    noise: float = 0.02

    @classmethod
    def from_dict(cls, data: dict, *, where: str = "fabric spec") -> "FabricSpec":
        """A spec from its mapping, every value checked for its type and range (the spec may be anyone's
        file: a node count of 10**9 or a fault factor of "x" is an InputError naming it, not a hang)."""
        from ncdoc.cluster.nodes import MAX_NAMES, expand
        from ncdoc.errors import shown
        if not isinstance(data, dict):
            raise InputError("a fabric spec must be a mapping", path=where)
        unknown = {str(k) for k in data} - SPEC_KEYS
        if unknown:
            raise InputError(f"unknown key(s) {shown(', '.join(sorted(unknown)))} (known: {', '.join(sorted(SPEC_KEYS))})",
                             path=where)

        def bad(what: str, value) -> InputError:
            return InputError(f"{what}: {shown(value)} is not {_EXPECTED.get(what.rsplit('.', 1)[-1], 'valid')}",
                              path=where)

        nodes = data.get("nodes", 8)
        if type(nodes) is int:
            if not 1 <= nodes <= MAX_NAMES:
                raise bad("nodes", nodes)
            width = max(2, len(str(nodes)))
            nodes = tuple(f"node{i:0{width}d}" for i in range(1, nodes + 1))
        elif isinstance(nodes, str):
            nodes = tuple(expand(nodes))
        elif isinstance(nodes, list) and len(nodes) <= MAX_NAMES and all(isinstance(n, (str, int)) for n in nodes):
            nodes = tuple(str(n) for n in nodes)
        else:
            raise bad("nodes", nodes)
        raw_faults = data.get("faults") or {}
        if not isinstance(raw_faults, dict):
            raise bad("faults", raw_faults)
        faults = {}
        for node, f in raw_faults.items():
            if not isinstance(f, dict) or {str(k) for k in f} - FAULT_KEYS:
                raise InputError(f"fault of {shown(node)}: keys must be among {', '.join(sorted(FAULT_KEYS))}",
                                 path=where)
            f = {k: _checked(f"faults.{node}.{k}", v, bad) for k, v in f.items()}
            f["ignore_env"] = tuple(f.get("ignore_env") or ())
            faults[str(node)] = NodeFault(**f)
        kw = {k: _checked(k, data[k], bad)
              for k in ("gpus_per_node", "nic_gbps", "gpu", "nccl_version", "nvlink_busbw", "seed", "noise") if k in data}
        if "rails" in data:
            kw["rails"] = tuple(_checked("rails", data["rails"], bad))
        return cls(nodes=nodes, faults=faults, **kw)

    @classmethod
    def load(cls, path: str) -> "FabricSpec":
        from ncdoc.readers.textfile import read_user_text as read_text
        from ncdoc.startup.json_load import load_data
        text = read_text(path, "a fabric spec")
        try:
            data = load_data(text) if path.endswith(".json") else _yaml(text, path)
        except ValueError as exc:
            raise InputError(f"cannot parse ({exc})", path=path) from None
        return cls.from_dict(data, where=path)

    def to_dict(self) -> dict:
        return {"nodes": list(self.nodes), "gpus_per_node": self.gpus_per_node, "rails": list(self.rails),
                "nic_gbps": self.nic_gbps, "gpu": self.gpu, "nccl_version": self.nccl_version,
                "nvlink_busbw": self.nvlink_busbw, "seed": self.seed, "noise": self.noise,
                "faults": {n: {k: (list(v) if isinstance(v, tuple) else v) for k, v in f.__dict__.items()
                               if v != getattr(NodeFault(), k)} for n, f in self.faults.items()}}

    def fault(self, node: str) -> NodeFault:
        return self.faults.get(node) or NodeFault()


_FACTOR = ("net", "nvlink", "flap", "flap_factor", "nic_gbps", "nvlink_busbw", "noise")
_EXPECTED = {"nodes": "a node count (1 or more), a hostlist or a list of names", "faults": "a mapping of nodes",
             "gpus_per_node": "a whole number from 1 to 1024", "seed": "a whole number",
             "gdr": "true or false", "down": "true or false", "rails": "a list of NIC names (or NIC: factor)",
             "ignore_env": "a list of variable names", "agent": "text", "perf": "text", "gpu": "text",
             "nccl_version": "text", **{k: "a finite number, 0 or more" for k in _FACTOR}}


def _checked(key: str, value, bad):
    """`value` for spec key `key` (a top-level or fault key, "faults.<node>." in front) when its type and
    range fit, else bad(key, value)."""
    name = key.rsplit(".", 1)[-1]
    if name in _FACTOR:
        ok = type(value) in (int, float) and value - value == 0 and 0 <= value < 1e9
    elif name == "gpus_per_node":
        ok = type(value) is int and 1 <= value <= 1024
    elif name == "seed":
        ok = type(value) is int and abs(value) < 1 << 63
    elif name in ("gdr", "down"):
        ok = type(value) is bool
    elif name in ("agent", "perf", "gpu", "nccl_version"):
        ok = isinstance(value, str) and len(value) <= 200
    elif name == "ignore_env":
        ok = isinstance(value, list) and all(isinstance(x, str) for x in value)
    elif name == "rails" and key == "rails":
        ok = isinstance(value, list) and 0 < len(value) <= 1024 and all(isinstance(x, str) for x in value)
    elif name == "rails":
        ok = isinstance(value, dict) and all(isinstance(k, str) and type(v) in (int, float) and v - v == 0
                                             and 0 <= v < 1e9 for k, v in value.items())
    else:
        ok = False
    if not ok:
        raise bad(key, value)
    return value


def _yaml(text: str, path: str):
    from ncdoc.readers.yaml_lines import load_plain     # screened and bounded (aliases, depth, numbers)
    return load_plain(text, path)


def _unit(*parts) -> float:
    """A number in [0, 1) from the parts: the simulator's only randomness, reproducible."""
    h = hashlib.blake2b(repr(parts).encode(), digest_size=8).digest()
    return int.from_bytes(h, "big") / 2.0 ** 64


class Fabric:
    def __init__(self, spec: FabricSpec):
        self.spec = spec

    def _node_net(self, node: str, rail: str | None, run: int, group) -> float:
        """One node's network rate as a fraction of healthy (its slowest rail when all are used)."""
        f = self.spec.fault(node)
        factor = f.net
        if rail is None:
            factor *= min([f.rails.get(r, 1.0) for r in self.spec.rails] or [1.0])
        else:
            factor *= f.rails.get(rail, 1.0)
        if not f.gdr:
            factor *= NO_GDR_FACTOR
        if f.flap and _unit(self.spec.seed, "flap", node, run, tuple(group), rail) < f.flap:
            factor *= f.flap_factor
        return factor

    def expected(self, nodes, *, rail: str | None = None) -> float:
        """The healthy figure for this group: what the same ring reaches with no fault."""
        s = self.spec
        if len(nodes) == 1 and rail is None:
            return s.nvlink_busbw
        nics = 1 if rail is not None else len(s.rails)
        return RING_EFFICIENCY * nics * s.nic_gbps / 8.0

    def busbw(self, nodes, *, rail: str | None = None, run: int = 0) -> float:
        """Large-message all-reduce busbw (GB/s) of a ring over `nodes` (one NIC per node with `rail`)."""
        nodes = tuple(nodes)
        s = self.spec
        if len(nodes) == 1 and rail is None:
            value = s.nvlink_busbw * s.fault(nodes[0]).nvlink
        else:
            value = self.expected(nodes, rail=rail) * min(self._node_net(n, rail, run, nodes) for n in nodes)
        jitter = 1.0 + s.noise * (2.0 * _unit(s.seed, "noise", nodes, rail, run) - 1.0)
        return round(value * jitter, 2)


__all__ = ["FabricSpec", "NodeFault", "Fabric", "RING_EFFICIENCY", "NO_GDR_FACTOR"]
