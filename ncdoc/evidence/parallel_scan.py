"""A large run file classified by several processes: byte ranges cut at block boundaries, each range's
blocks classified by a worker (block_scan.classify_block, made ready to travel with prepare_transfer),
and the results applied in file order by the one RunScanner of this process.

The ranges are unions of the blocks one reader of the whole file meets (textfile.read_blocks: where a
block ends depends on the file alone), the workers send back what the readers need of each block, and
the scanner reads a block again from the file in the rare case it needs more. So the facts are the ones
one process reading the file gives, whatever the number of workers and the ranges.

Workers are started with the platform's multiprocessing start method (fork, spawn or forkserver: the
worker function and its arguments are plain and importable; spawn where fork would copy other threads); at most two ranges per worker are in
flight, so memory stays bounded however large the file.
"""

from __future__ import annotations

from collections import deque

_IN_FLIGHT = 2          # ranges per worker classified ahead of the reader


def plan_ranges(path: str, size: int, range_bytes: int, block_bytes: int) -> list[tuple[int, int]]:
    """(start, end) byte ranges covering the file, each starting at a block boundary near a multiple of
    `range_bytes` (itself a multiple of the block size)."""
    from ncdoc.evidence.textfile import block_start
    from ncdoc.readers.textfile import open_user_file
    step = max(block_bytes, range_bytes // block_bytes * block_bytes)
    cuts = [0]
    with open_user_file(path) as f:
        for mark in range(step, size, step):
            at = block_start(f, mark, size)
            if at > cuts[-1]:
                cuts.append(at)
    cuts.append(size)
    return [(a, b) for a, b in zip(cuts, cuts[1:]) if b > a]


def classify_range(path: str, start: int, end: int, block_bytes: int) -> list:
    """The BlockScans of the blocks in [start, end) of the file, ready to send (a worker's task)."""
    from ncdoc.evidence.block_scan import TransferMemo, classify_block, prepare_transfer
    from ncdoc.evidence.textfile import read_blocks
    from ncdoc.readers.textfile import open_user_file
    memo = TransferMemo()
    out = []
    with open_user_file(path) as f:
        for offset, block in read_blocks(f, start, end, block_bytes, path):
            bs = classify_block(block, bare=True)
            bs.offset = offset
            out.append(prepare_transfer(bs, memo))
    return out


def _start_method() -> str | None:
    """The platform's start method, except fork in a process that runs other threads (a forked child gets
    their locks held and no thread to free them): spawn there."""
    import threading
    import multiprocessing
    method = multiprocessing.get_start_method(allow_none=True) or multiprocessing.get_all_start_methods()[0]
    return "spawn" if method == "fork" and threading.active_count() > 1 else None


def _task(args: tuple):
    from ncdoc.errors import NcdocError
    try:
        return classify_range(*args)
    except (NcdocError, OSError) as exc:         # said in one line by the reader, naming the file
        return _Failed(getattr(exc, "message", None) or str(exc))


class _Failed:
    def __init__(self, message: str) -> None:
        self.message = message


def scan_parallel(scanner, path: str, size: int, plan, block_bytes: int) -> None:
    """Classify the file's ranges in `plan.jobs` worker processes; apply them to `scanner` in order."""
    import multiprocessing
    ranges = plan_ranges(path, size, plan.range_bytes, block_bytes)
    ctx = multiprocessing.get_context(plan.start_method or _start_method())
    jobs = max(1, min(plan.jobs, len(ranges)))
    with ctx.Pool(jobs) as pool:
        pending: deque = deque()
        todo = iter(ranges)
        try:
            for start, end in todo:
                pending.append(pool.apply_async(_task, ((path, start, end, block_bytes),)))
                if len(pending) >= jobs * _IN_FLIGHT:
                    break
            while pending:
                scans = pending.popleft().get()
                if isinstance(scans, _Failed):
                    from ncdoc.errors import InputError
                    raise InputError(scans.message)
                nxt = next(todo, None)
                if nxt is not None:
                    pending.append(pool.apply_async(_task, ((path, nxt[0], nxt[1], block_bytes),)))
                scanner.merge(scans)
        except BaseException:
            pool.terminate()
            raise


__all__ = ["plan_ranges", "classify_range", "scan_parallel"]
