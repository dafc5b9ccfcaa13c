"""Facts from an NCCL_DEBUG=INFO log: version, transport, devices, GPUDirect RDMA, env, errors.

Any NCCL 2.x format, many ranks interleaved, launcher tags (mpirun --tag-output, srun -l,
torchrun), timestamps, truncated lines and framework noise around it. The parser streams:
it reads a few MiB at a time and keeps bounded summaries, so a 50 GB log costs the same
memory as a 50 kB one. Facts only; what they mean for a job is for the rules to say.

    facts = parse_nccl_log_file("job.log")
    facts.transport, facts.gdr.state, facts.to_facts()["net_devices"]
"""

from __future__ import annotations

TYPE_CHECKING = False
if TYPE_CHECKING:
    from pathlib import Path

from collections.abc import Iterable

from ncdoc.evidence.nccl_log_model import (
    ChannelFacts, CommFacts, GdrFacts, LogFacts, NetDevice, PluginFacts, Problem, RankFacts, SocketIface,
)
from ncdoc.evidence.textfile import iter_file_blocks, iter_line_blocks

__all__ = ["ChannelFacts", "CommFacts", "GdrFacts", "LogFacts", "NetDevice", "PluginFacts", "Problem", "RankFacts",
           "SocketIface", "parse_nccl_log", "parse_nccl_log_file"]


def parse_nccl_log(lines: Iterable[str], source: str = "") -> LogFacts:
    """Facts from the lines of an NCCL log (any iterable of str; newlines optional)."""
    from ncdoc.evidence.nccl_log_scan import LogScanner
    scanner = LogScanner()
    for block in iter_line_blocks(lines):
        scanner.feed(block)
    return scanner.result(source)


def parse_nccl_log_file(path: str | Path) -> LogFacts:
    """Facts from an NCCL log file; InputError (one line) when it is missing, empty or binary."""
    from ncdoc.evidence.nccl_log_scan import LogScanner
    scanner = LogScanner()
    for block in iter_file_blocks(path):
        scanner.feed(block)
    return scanner.result(str(path))
