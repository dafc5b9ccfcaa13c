"""What rules produce: findings with evidence and fixes, and skips with their reasons."""

from __future__ import annotations

from ncdoc.startup.record import field, Record, record

SEVERITIES = ("info", "warning", "error")


def severity_rank(severity: str) -> int:
    """info < warning < error; "none" (never fail) ranks above error."""
    if severity == "none":
        return len(SEVERITIES)
    return SEVERITIES.index(severity)


@record(frozen=True)
class Evidence(Record):
    """One fact or line that backs a finding."""
    text: str
    source: str = ""          # a file path, "snapshot", "env", "hcas/mlx5_0/port 1"
    line: int | None = None   # 1-based line number in `source` when it is a file

    def where(self) -> str:
        if self.source and self.line:
            return f"{self.source}:{self.line}"
        return self.source

    def to_dict(self) -> dict:
        return {"text": self.text, "source": self.source, "line": self.line}


@record(frozen=True)
class Hit(Record):
    """What a check function returns for each problem it sees; the engine adds the rule's metadata."""
    message: str
    evidence: tuple[Evidence, ...] = ()
    fix: str | None = None                 # overrides the rule's generic fix when more specific
    env_patch: dict[str, str | None] = field(default_factory=dict)   # NAME -> value (None = unset)
    severity: str | None = None            # overrides the rule's severity for this hit
    subject: str = ""                      # what the hit is about ("mlx5_0:1", "NCCL_IB_HCA"), for dedup and sorting
    scope: str | None = None               # overrides the rule's scope for this hit ("multi-node", "any")


class Skip(Exception):
    """Raised by a check when the facts it needs are unknown: the rule is skipped, not passed."""

    def __init__(self, reason: str):
        super().__init__(reason)
        self.reason = reason


@record(frozen=True)
class Finding(Record):
    code: str
    name: str
    severity: str
    family: str
    message: str
    evidence: tuple[Evidence, ...] = ()
    fix: str = ""
    docs: str = ""
    env_patch: dict[str, str | None] = field(default_factory=dict)
    subject: str = ""
    # A finding the engine judged milder than its rule says, and why: a `scope: multi-node` rule on
    # a job known to run on one node is info there (ncdoc.engine.rules.run_rules).
    original_severity: str = ""
    note: str = ""

    def to_dict(self) -> dict:
        out = {
            "code": self.code, "name": self.name, "severity": self.severity, "family": self.family,
            "message": self.message, "evidence": [e.to_dict() for e in self.evidence],
            "fix": self.fix, "docs": self.docs, "env_patch": dict(self.env_patch),
        }
        if self.original_severity:
            out["downgraded"] = {"from": self.original_severity, "reason": self.note}
        return out


@record(frozen=True)
class Skipped(Record):
    code: str
    name: str
    reason: str

    def to_dict(self) -> dict:
        return {"code": self.code, "name": self.name, "reason": self.reason}


@record(frozen=True)
class Report(Record):
    findings: tuple[Finding, ...] = ()
    skipped: tuple[Skipped, ...] = ()

    def worst(self) -> str | None:
        if not self.findings:
            return None
        return max((f.severity for f in self.findings), key=severity_rank)

    def fails(self, fail_on: str) -> bool:
        """True when any finding is at or above `fail_on` ("info" | "warning" | "error" | "none")."""
        threshold = severity_rank(fail_on)
        return any(severity_rank(f.severity) >= threshold for f in self.findings)
