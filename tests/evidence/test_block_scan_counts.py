"""The shortcuts classify_block takes give what the plain definitions give: the first lines of a block's new AGG
messages found together (first_aggs) are first_agg's one by one, and the newlines line_passes counts on from its
last other line are the block's."""

from __future__ import annotations

from ncdoc.evidence import block_scan as B
from paths import FIXTURES

LOGS = sorted((FIXTURES / "logs").glob("*.log"))


def _blocks():
    for log in LOGS:
        data = log.read_bytes()
        data = data[:data.rfind(b"\n") + 1]
        if data:
            yield log.name, data


def test_first_aggs_are_first_agg_each():
    seen = 0
    for name, block in _blocks():
        msgs = list(B.log_passes(block)[1])
        assert B.first_aggs(block, msgs) == {m: B.first_agg(block, m) for m in msgs}, name
        seen += len(msgs)
    assert seen > 50


def test_first_aggs_skips_a_longer_line_that_starts_with_the_message():
    block = (b"h:1:1 [0] NCCL INFO NET/Plugin: Could not find: libnccl-net.so and more\n"
             b"other line\n"
             b"h:1:1 [0] NCCL INFO NET/Plugin: Could not find: libnccl-net.so\r\n"
             b"h:2:2 [1] NCCL INFO cudaDriverVersion 12090\n")
    msgs = [b"cudaDriverVersion 12090", b"NET/Plugin: Could not find: libnccl-net.so"]
    got = B.first_aggs(block, msgs)
    assert got == {m: B.first_agg(block, m) for m in msgs}
    assert got[msgs[1]][1] == 2 and got[msgs[0]][1] == 3


def test_line_passes_count_every_newline():
    for name, block in _blocks():
        assert B.line_passes(block)[0] == block.count(b"\n"), name
    for block in (b"\n", b"a\n", b"a\nb\n\n", b"x:1:1 [0] NCCL INFO a\n", b"x:1:1 [0] NCCL INFO a\nplain\n"):
        assert B.line_passes(block)[0] == block.count(b"\n")
        assert B.classify_block(block, bare=True).nlines == block.count(b"\n")
