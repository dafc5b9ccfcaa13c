"""The per-collective TUNING lines and the per-rank ENV lines of an NCCL_DEBUG=INFO log.

NCCL's log parser (ncdoc.evidence.nccl_log) keeps the run's facts across ranks; what a
measurement must be checked against is per rank and per message size, so this small reader
keeps exactly that:

  TUNING (rank 0, NCCL_DEBUG_SUBSYS=TUNING; src/enqueue.cc):
    2.24+   "%s: %ld Bytes -> Algo %s proto %s channel{Lo..Hi}={%d..%d}"
            names from ncclAlgoToString / ncclProtoToString: RING, TREE, NVLS_TREE, SIMPLE, LL128
    2.23    "%s: %ld Bytes -> Algo %d proto %d time %f"        (numeric ids)
    2.21    "%ld Bytes -> Algo %d proto %d time %f"            (no collective name)
  ENV (every rank, NCCL_DEBUG_SUBSYS=ENV):
    "%s set by environment to %lld."   (integer parameters, src/misc/param.cc)
    "%s set by environment to %s"      (string variables: NCCL_ALGO, NCCL_SOCKET_IFNAME, ...)
    "%s set to %s"                     (NCCL_IB_HCA, NCCL_SOCKET_IFNAME on the NET subsystem)

Algorithms and protocols are returned in the spelling NCCL_ALGO / NCCL_PROTO accept (Ring,
NVLSTree, Simple), so a measured choice can be written back as a setting.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field
from ncdoc.readers.numbers import is_digits
from ncdoc.startup.compiled_patterns import precompiled

_PREFIX = precompiled(r"(?P<host>[\w.\-]+):(?P<pid>\d{1,20}(?!\d)):(?P<tid>\d{1,20}(?!\d)) \[(?P<dev>\d{1,20}(?!\d))\] NCCL INFO (?P<msg>.*)$")
_TUNE_NAMED = precompiled(r"^(?P<coll>\w+): (?P<bytes>\d{1,20}(?!\d)) Bytes -> Algo (?P<algo>\w+) proto (?P<proto>\w+)"
                         r"(?: channel\{Lo\.\.Hi\}=\{(?P<lo>\d{1,20}(?!\d))\.\.(?P<hi>\d{1,20}(?!\d))\})?")
_TUNE_BARE = precompiled(r"^(?P<bytes>\d{1,20}(?!\d)) Bytes -> Algo (?P<algo>\d{1,20}(?!\d)) proto (?P<proto>\d{1,20}(?!\d))")
_ENV = precompiled(r"^(?P<name>NCCL_[A-Z0-9_]+) set (?:by environment )?to (?P<value>.*\S|)\s*$")
_VERSION = precompiled(r"^NCCL version (?P<v>\d+\.\d+\.\d+)")

# Algorithm and protocol ids (src/include/devcomm.h order) and ncclAlgoToString's names.
ALGO_IDS = ("Tree", "Ring", "CollnetDirect", "CollnetChain", "NVLS", "NVLSTree", "PAT")
PROTO_IDS = ("LL", "LL128", "Simple")
_ALGO_NAMES = {"TREE": "Tree", "RING": "Ring", "COLLNET_DIRECT": "CollnetDirect", "COLLNETDIRECT": "CollnetDirect",
               "COLLNET_CHAIN": "CollnetChain", "COLLNETCHAIN": "CollnetChain", "NVLS": "NVLS",
               "NVLS_TREE": "NVLSTree", "NVLSTREE": "NVLSTree", "PAT": "PAT"}
_PROTO_NAMES = {"LL": "LL", "LL128": "LL128", "SIMPLE": "Simple"}

# nccl-tests binary -> NCCL's function name in TUNING lines
COLLECTIVE_FUNC = {"all_reduce": "AllReduce", "all_gather": "AllGather", "reduce_scatter": "ReduceScatter",
                   "broadcast": "Broadcast", "reduce": "Reduce", "alltoall": "AlltoAll", "sendrecv": "SendRecv",
                   "gather": "Gather", "scatter": "Scatter"}


def algo_name(token: str) -> str:
    if is_digits(token):
        i = int(token)
        return ALGO_IDS[i] if i < len(ALGO_IDS) else token
    return _ALGO_NAMES.get(token.upper(), token)


def proto_name(token: str) -> str:
    if is_digits(token):
        i = int(token)
        return PROTO_IDS[i] if i < len(PROTO_IDS) else token
    return _PROTO_NAMES.get(token.upper(), token)


@dataclass(frozen=True)
class Pick:
    """One TUNING line: what NCCL chose for one collective call."""
    collective: str | None           # NCCL's name ("AllReduce"); None in 2.21's lines
    nbytes: int                      # count x type size, as NCCL prints it (per rank for AllGather)
    algo: str
    proto: str
    channels: int | None = None      # channelHi - channelLo + 1 (2.24+)


@dataclass
class RankLog:
    """What the TUNING/ENV/version lines say, per rank (host:pid)."""
    host_of: dict[str, str] = field(default_factory=dict)
    env: dict[str, dict[str, str]] = field(default_factory=dict)        # rank -> NAME -> value
    versions: dict[str, str] = field(default_factory=dict)              # rank -> NCCL version
    picks: list[Pick] = field(default_factory=list)
    info_lines: int = 0

    @property
    def ranks(self) -> list[str]:
        return list(self.host_of)

    def chosen(self, collective: str | None, nbytes: int) -> Pick | None:
        """The most common pick for calls of this size (warm-up, timed and check calls all print one)."""
        found = [p for p in self.picks if p.nbytes == nbytes and (collective is None or p.collective in
                                                                    (None, collective))]
        if not found:
            return None
        return Counter(found).most_common(1)[0][0]


def read(lines) -> RankLog:
    out = RankLog()
    for raw in lines:
        line = raw.rstrip("\n")
        if "NCCL INFO" not in line:
            continue
        m = _PREFIX.search(line)
        if not m:
            continue
        out.info_lines += 1
        rank = f"{m.group('host')}:{m.group('pid')}"
        out.host_of.setdefault(rank, m.group("host"))
        msg = m.group("msg")
        if "Bytes -> Algo" in msg:
            t = _TUNE_NAMED.match(msg) or _TUNE_BARE.match(msg)
            if t:
                lo, hi = t.groupdict().get("lo"), t.groupdict().get("hi")
                out.picks.append(Pick(t.groupdict().get("coll"), int(t.group("bytes")), algo_name(t.group("algo")),
                                      proto_name(t.group("proto")),
                                      int(hi) - int(lo) + 1 if lo is not None and hi is not None else None))
            continue
        e = _ENV.match(msg)
        if e:
            value = e.group("value")
            if value.endswith(".") and is_digits(value[:-1].lstrip("-")):
                value = value[:-1]
            out.env.setdefault(rank, {})[e.group("name")] = value
            continue
        v = _VERSION.match(msg)
        if v:
            out.versions[rank] = v.group("v")
    return out


__all__ = ["Pick", "RankLog", "read", "algo_name", "proto_name", "COLLECTIVE_FUNC"]
