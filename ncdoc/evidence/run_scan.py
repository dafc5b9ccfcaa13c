"""Reading a run file in one pass: every block classified once (block_scan.classify_block), then applied in
file order to every reader of run output - the NCCL log scanner, the nccl-tests reader, the launch
settings, the RAS / DIAG / host report readers, and the lines a pasted node listing may sit on. Each
reader gets only its candidate lines, with their line numbers; the log scanner its events.

A file above the parallel threshold is cut into byte ranges at block boundaries (parallel_scan), the
ranges classified by worker processes and the results applied here in order: the same blocks, in the
same order, read by the same code, so the facts are the ones one process reading it gives.

    run = scan_file("job.log", jobs=2)          # RunFacts
    run = scan_lines(text.splitlines(), "paste")
"""

from __future__ import annotations

import os

from ncdoc.startup.record import field, record, replace
TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any

from ncdoc.evidence import block_scan as B

MAX_REPORT_LINES = 1 << 20      # lines of a file kept for each report reader
MAX_LISTING_LINES = 1 << 16     # other lines kept for the node listings a run file may hold (their lines)


@record
class ScanPlan:
    """How a file is read: worker processes (1: this one alone; 0: as many as pay, see default_jobs), the block
    size, the byte range a worker takes at a time, the size from which a file is cut into ranges at all (a
    small one is read here: starting workers costs more than it saves), and the multiprocessing start method
    (None: the platform's)."""
    jobs: int = 1
    block_bytes: int = 0                # 0: textfile.BLOCK_BYTES
    range_bytes: int = 8 << 20
    parallel_from: int = 24 << 20
    start_method: str | None = None

    @staticmethod
    def default_jobs() -> int:
        """The processes a file is read by when no number is given: one per core for the Python scanner; this
        one alone for the native scanner, whose classification costs less than sending its results from a
        worker (on 2 cores, a 1.4 GB log: 4.8 s alone against 6.1 s with two workers; 537 MB: 2.5 against
        2.9 s; never faster at any size measured). Asked only of a file large enough to be cut."""
        from ncdoc.evidence.nccl_log_native import NATIVE
        return 1 if NATIVE is not None else ScanPlan.cores()

    @staticmethod
    def cores() -> int:
        """The cores this process may run on."""
        try:
            return max(1, len(os.sched_getaffinity(0)))
        except (AttributeError, OSError):
            return max(1, os.cpu_count() or 1)


@record
class RunFacts:
    """What the readers of run output found in one file."""
    source: str
    lines: int
    log: Any = None                      # LogFacts
    tests: Any = None                    # NcclTestsFacts
    launch: Any = None                   # LaunchEnv
    report_lines: dict[str, list] = field(default_factory=dict)   # "ras" | "diag" | "host" -> [(line, text)]
    other_lines: tuple = ()              # (line, text) of the lines that are not NCCL's own (node listings)
    listing_cut: bool = False            # more such lines than MAX_LISTING_LINES: the first ones kept


class RunScanner:
    """The readers of run output, fed in file order: blocks (feed) or their BlockScans (apply, merge)."""

    def __init__(self, source: str = "", *, errors: str = "replace", reread=None) -> None:
        from ncdoc.evidence.launch_env import RunLaunchLines
        from ncdoc.evidence.nccl_log_scan import LogScanner
        from ncdoc.evidence.nccl_tests_text import TextParser
        self.source = source
        self.errors = errors             # how line bytes are decoded ("surrogatepass" for text held as str)
        self.log = LogScanner(reread)
        self.tests = TextParser()
        self.launch = RunLaunchLines(source)
        self.reports: dict[str, list] = {"ras": [], "diag": [], "host": []}
        self.other: list[tuple[int, str]] = []
        self.listing_cut = False

    def feed(self, block: bytes, offset: int = -1) -> None:
        bs = B.classify_block(block, bare=True)
        bs.offset = offset
        self.apply(bs)

    def merge(self, scans) -> None:
        """Apply the BlockScans of a range of the file, classified elsewhere, in order."""
        for bs in scans:
            self.apply(bs)

    def apply(self, bs: B.BlockScan) -> None:
        base = self.log.state.lines
        self.log.apply(bs)
        errors = self.errors

        def text(raw: bytes) -> str:
            return raw.decode("utf-8", errors).rstrip("\r")

        other = [(n, text(raw)) for n, raw in bs.other]
        # nccl-tests: the other lines and the plain ones that may be a failure line, in order; the rest only counted
        tests = self.tests
        plain = [(n, text(raw)) for n, raw in bs.test_plain]
        for n, line in (sorted(other + plain) if plain else other):
            tests.line(base + n + 1, line)
        tests.count_nccl_lines(bs.nlines - len(bs.other) - len(plain))
        # launch settings: the other lines, and the plain lines a backslash continues a command into
        launch = self.launch
        if launch.continued and (not other or other[0][0] != 0):
            for n, raw in enumerate(bs.head):      # a command line of the block before goes on here
                if not launch.continued:
                    break
                launch.line(base + n + 1, text(raw))
        cont = [(n, text(raw)) for n, raw in bs.cont]
        for n, line in (sorted(other + cont) if cont else other):
            if n > launch.last - base - 1:
                launch.line(base + n + 1, line)
        # the report readers: the lines holding their markers (a block with an ncclras report: all its lines)
        reports = self.reports
        if bs.ras_whole is not None:
            kept = reports["ras"]
            for n, raw in enumerate(bs.ras_whole):
                if len(kept) < MAX_REPORT_LINES:
                    kept.append((base + n + 1, text(raw)))
        for n, raw, bits in bs.marked:
            for kind, bit in (("ras", B.RAS), ("diag", B.DIAG), ("host", B.HOST)):
                if bits & bit and (kind != "ras" or bs.ras_whole is None) and len(reports[kind]) < MAX_REPORT_LINES:
                    reports[kind].append((base + n + 1, text(raw)))
        # node listings pasted into the run (ibv_devinfo, topo -m): among the other lines
        room = MAX_LISTING_LINES - len(self.other)
        if len(other) > room:
            self.listing_cut = True
            other = other[:max(room, 0)]
        self.other.extend((base + n + 1, line) for n, line in other)

    def result(self) -> RunFacts:
        from ncdoc.evidence.nccl_tests_text import has_tests
        log = self.log.result(self.source)
        tests = self.tests.result(self.source)
        return RunFacts(self.source, self.log.state.lines, log if has_log(log) else None,
                        tests if has_tests(tests) else None, self.launch.result(),
                        {k: v for k, v in self.reports.items() if v}, tuple(self.other), self.listing_cut)


def has_log(facts: Any) -> bool:
    """Whether the log scanner read anything NCCL printed."""
    return bool(getattr(facts, "recognised_lines", 0) or getattr(facts, "problems", ())
                or getattr(facts, "nccl_version", None)
                or getattr(facts, "transport", None))       # channel lines alone ("... via NET/IB/0")


# ---------------------------------------------------------------- entry points

def scan_lines(lines, source: str = "") -> RunFacts:
    """A run text held as lines (str, no line ends needed), read in one pass."""
    from ncdoc.evidence.textfile import iter_line_blocks
    scanner = RunScanner(source, errors="surrogatepass")
    for block in iter_line_blocks(lines):
        scanner.feed(block)
    return scanner.result()


def scan_file(path: str, plan: ScanPlan | None = None) -> RunFacts:
    """A run file read in one pass (by `plan.jobs` processes when it is large enough); InputError when it
    cannot be read."""
    from ncdoc.evidence import textfile
    plan = plan or ScanPlan()
    block_bytes = plan.block_bytes or textfile.BLOCK_BYTES
    size = os.path.getsize(path)
    if not plan.jobs and size >= plan.parallel_from:
        plan = replace(plan, jobs=ScanPlan.default_jobs())
    if plan.jobs > 1 and size >= plan.parallel_from:
        from ncdoc.evidence.parallel_scan import scan_parallel
        scanner = RunScanner(path, reread=lambda offset, _size: textfile.block_at(path, offset, block_bytes))
        scan_parallel(scanner, path, size, plan, block_bytes)
        return scanner.result()
    from ncdoc.readers.textfile import open_user_file
    scanner = RunScanner(path)
    with open_user_file(path) as f:
        for offset, block in textfile.read_blocks(f, 0, None, block_bytes, path):
            scanner.feed(block, offset)
    return scanner.result()


__all__ = ["ScanPlan", "RunFacts", "RunScanner", "has_log", "scan_lines", "scan_file", "MAX_REPORT_LINES",
           "MAX_LISTING_LINES"]
