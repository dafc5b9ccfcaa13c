"""The lines that take a bad node out of service: Slurm's drain and a Kubernetes taint.

They are printed for a person (or a prolog) to run; `run_slurm` runs the scontrol lines only
when asked (`ncdoc cluster test --drain`), each with a timeout, and says what it did.
"""

from __future__ import annotations

import re
import shlex

TAINT_KEY = "ncdoc.io/nccl-fault"


def _reason(finding) -> str:
    what = {"bad-node": "slow in NCCL tests", "slow-node": "slow alone (NVLink/intra-node)",
            "bad-rail": f"rail {finding.rail} slow", "intermittent": "intermittent NCCL slowness"}.get(
        finding.kind, finding.kind)
    first = finding.evidence[0] if finding.evidence else ""
    return f"ncdoc: {what}" + (f" ({first})" if first else "")


def commands(findings) -> dict[str, list[str]]:
    """{"slurm": [scontrol lines], "kubernetes": [kubectl lines]} for the nodes the findings name."""
    seen: dict[str, object] = {}
    for f in findings:
        if f.kind == "slow-path":
            continue                      # the path between two good nodes: not a node to drain
        seen.setdefault(f.node, f)
    slurm, k8s = [], []
    for node, f in seen.items():
        reason = _reason(f)[:200]
        slurm.append(f"scontrol update NodeName={node} State=DRAIN Reason={shlex.quote(reason)}")
        value = re.sub(r"[^A-Za-z0-9_.-]", "-", f.kind)[:63]
        k8s.append(f"kubectl taint nodes {node} {TAINT_KEY}={value}:NoSchedule")
    return {"slurm": slurm, "kubernetes": k8s}


def run_slurm(lines, *, scontrol: str = "scontrol", timeout_s: float = 30.0) -> list[str]:
    """Run the scontrol lines; one line of outcome each."""
    import subprocess
    out = []
    for line in lines:
        argv = shlex.split(line)
        argv[0] = scontrol
        try:
            p = subprocess.run(argv, capture_output=True, text=True, timeout=timeout_s)
        except (OSError, subprocess.TimeoutExpired) as exc:
            out.append(f"failed: {line} ({exc})")
            continue
        status = "drained" if p.returncode == 0 else f"failed ({(p.stderr or p.stdout).strip()[:200]})"
        out.append(f"{status}: {line}")
    return out


__all__ = ["commands", "run_slurm", "TAINT_KEY"]
