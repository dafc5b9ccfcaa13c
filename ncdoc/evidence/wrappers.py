"""What launchers and log shippers put in front of a program's lines, and how to see past it.

A line of NCCL, nccl-tests or framework output reaches a user through layers that each prefix
it: the launcher (mpirun --tag-output `[1,0]<stdout>:`, Intel MPI / MPICH -prepend-rank `[0] `,
srun --label ` 0: `, torchrun `[rank0]:` / `[default0]:`, Ray `(RayWorkerWrapper pid=4009) `,
a test runner's `12: `), the log shipper (CloudWatch `  | 2024-11-28T07:42:11.527Z | `, journald
`Nov 09 15:39:31 host unit[42]: `, Kubernetes `kubectl logs --prefix --timestamps`
`[pod/name/container] 2024-01-01T00:00:00.000000000Z `, a CI's `[task <ISO time>] [step] `), the
viewer (line numbers `[80746] `, ANSI colour codes or their remnants `[36m`), NCCL's own
NCCL_DEBUG_TIMESTAMP_FORMAT `[2025-11-09 07:39:30] `. They stack.

`strip_wrappers(line)` removes every such layer from the start of a line (and a log deduplicator's
count from its end), so the signs of an
input kind and the line parsers see what the program printed. One anchored pattern of
alternatives each starting with a literal or a bounded class, tried once per line: linear time.
It never removes what a program prints itself at the start of its lines: NCCL's `host:pid:tid`
(no space after the colon), nccl-tests' `#` comments and result rows (digits then spaces, not
digits then a colon), a failure line's `host: Test ...`.
"""

from __future__ import annotations

from ncdoc.evidence.lazy_re import lazy
from ncdoc.startup.compiled_patterns import precompiled

_TS_DATE = r"\d{4}-\d\d-\d\d"
_TS_TIME = r"\d\d:\d\d:\d\d(?:[.,]\d{1,9})?"
_TS_ZONE = r"(?:Z|\s?[+-]\d\d:?\d\d)?"
_ISO = rf"{_TS_DATE}[T ]{_TS_TIME}{_TS_ZONE}"

_LAYERS = (
    r"[ \t]+",
    r"\x1b?\[[0-9;]{1,12}m",                                   # ANSI colour, or what is left of it
    r"\[\d{1,6},\d{1,6}\]<\w{1,10}>:",                         # mpirun --tag-output
    rf"\[(?:[A-Za-z]{{1,16}} )?{_ISO}\]:?",                    # [2025-11-09 07:39:30], [task 2025-...Z]
    r"\[[^\]\s]{1,80}\](?:<\w{1,10}>)?:",                    # [rank0]: [default0]: [trainer0|0]:
    r"\[[^\]\s]{1,80}\](?=[ \t\[(|]|$)",                    # [0] [80746] [pod/a/b] [train], then a space
    rf"{_ISO}(?=[ \t|])",                                      # ISO timestamps (CloudWatch, kubectl, collectors)
    r"\|(?=[ \t])",                                            # CloudWatch's column bars
    r"[A-Z][a-z]{2} [ \d]\d \d\d:\d\d:\d\d [\w.\-]{1,64} [\w./@\-]{1,64}(?:\[\d{1,10}\])?: ",  # journald
    r"\((?:[\w.\-]{1,64} )?pid=\d{1,10}(?:, ip=[\d.:a-fA-F]{1,40})?\)",   # Ray workers
    r"\(raylet(?:, ip=[\d.:a-fA-F]{1,40})?\)",
    r"\d{1,6}: ",                                              # srun --label, test runners
    r"[\w.\-]{1,64}[ \t]+\|[ \t]",                              # docker compose "worker-1  | "
    # pdsh / clush "node01: " - only before what a program prints at the start of a line: a comment or a table
    # row of nccl-tests, NCCL's "host:pid:tid " (a failure line's own "host: Test ..." stays)
    r"[\w.\-]{1,64}: (?=#|[ \t]*\d|[\w.\-]{1,64}:\d{1,10}:\d{1,10} )",
)
_WRAPPER = precompiled("(?:" + "|".join(_LAYERS) + ")+")


# Ray's log deduplication folds identical lines from many workers into one and appends how many it
# folded: " [repeated 15x across cluster]" (dimmed with ANSI codes on a terminal; the first time followed by
# " (Ray deduplicates logs by default. Set RAY_DEDUP_LOGS=0 ...)"). It is not part of what the program printed.
# Compiled when first asked: only a text holding "across cluster]" is searched for it.
_RAY_REPEAT = lazy(r"(?:\x1b?\[[0-9;]{0,12}m)?[ \t]?\[repeated \d{1,9}x across cluster\]"
                         r"(?: \(Ray deduplicates logs by default\.[^\n]{0,400}?\))?(?:\x1b?\[[0-9;]{0,12}m)?[ \t\r]*$")


def drop_repeat_suffix(text: str) -> str:
    """`text` without a log deduplicator's "[repeated Nx across cluster]" tail."""
    if "across cluster]" not in text:
        return text
    m = _RAY_REPEAT.search(text)
    return text[:m.start()] if m else text


def wrapper_end(line: str) -> int:
    """Where the program's own text starts in `line` (0 when nothing wraps it)."""
    m = _WRAPPER.match(line)
    return m.end() if m else 0


def strip_wrappers(line: str) -> str:
    """`line` without the launcher, shipper and viewer prefixes in front of it."""
    if not line or line[0] == "#":
        return line
    m = _WRAPPER.match(line)
    return drop_repeat_suffix(line[m.end():] if m else line)


def unwrapped_text(text: str) -> str:
    """Every line of `text` without its wrappers (for the signs of the input kinds)."""
    return "\n".join(strip_wrappers(x) for x in text.splitlines())


__all__ = ["drop_repeat_suffix", "strip_wrappers", "unwrapped_text", "wrapper_end"]
