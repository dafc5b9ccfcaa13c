"""Markdown from hostile input stays inert: log text, HCA and host names with HTML, links, table pipes,
backticks and headings come out escaped or inside code spans, in every command's markdown.

Checked on the rendered text itself: outside code spans (CommonMark: a run of backticks up to the next run
of the same length) no '<' or '[' is left unescaped, every table row has as many unescaped pipes as its
table's header, and the input's own lines ("# heading") never start a line of the document.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

from ncdoc.cli.main import main

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "envfiles"))
from test_hostile_names import _hostile  # noqa: E402

EVIL = "<img src=x onerror=alert(1)>|a|b|`x`[y](javascript:alert(1))\n# heading\n<script>s</script>"
LOG = """node01:4012:4012 [0] NCCL INFO NCCL version 2.21.5+cuda12.4
node01:4012:4012 [0] NCCL INFO NCCL_SOCKET_IFNAME set by environment to <img src=x onerror=alert(1)>
node01:4012:4012 [0] NCCL INFO NCCL_IB_HCA set by environment to [x](javascript:alert(1))|a|b|`code`
node01:4012:4012 [0] NCCL INFO NET/Socket : Using [0]<script>alert(1)</script>:10.0.0.1<0>
node01:4012:4012 [0] NCCL INFO Using network Socket
node01:4012:4090 [0] misc/socket.cc:484 NCCL WARN socketStartConnect: Connect to 10.0.0.2<43669> failed : <b>x</b> ](javascript:x)
node01:4012:4090 [0] NCCL WARN NET/IB : No device found. <svg onload=alert(1)> ``` fence
"""
def _outside_spans(line: str) -> str:
    """`line` without its code spans, as CommonMark reads them: an unescaped run of backticks opens one that the
    next run of the same length closes (backslashes inside are literal); an unclosed run is literal text."""
    out, i, n = [], 0, len(line)
    while i < n:
        c = line[i]
        if c == "\\" and i + 1 < n:
            out.append(line[i:i + 2])
            i += 2
            continue
        if c == "`":
            j = i
            while j < n and line[j] == "`":
                j += 1
            run = line[i:j]
            k = j
            while True:
                k = line.find(run, k)
                if k < 0 or (k + len(run) >= n or line[k + len(run)] != "`"):
                    break
                while k < n and line[k] == "`":
                    k += 1
            if k >= 0:
                i = k + len(run)
                continue
            out.append(run)
            i = j
            continue
        out.append(c)
        i += 1
    return "".join(out)


def _unescaped(text: str, ch: str) -> list[int]:
    return [i for i, c in enumerate(text) if c == ch and (len(text[:i]) - len(text[:i].rstrip("\\"))) % 2 == 0]


def assert_inert(md: str) -> None:
    header_pipes = None
    fence = False
    for line in md.splitlines():
        if line.startswith("```"):
            fence = not fence
            continue
        if fence:
            continue
        rest = _outside_spans(line)
        for ch in "<[":
            assert not _unescaped(rest, ch), f"unescaped {ch!r} in: {line}"
        if line.startswith("|"):
            pipes = len(_unescaped(rest, "|"))
            header_pipes = header_pipes if header_pipes is not None else pipes
            assert pipes == header_pipes, f"a cell's pipe splits the table: {line}"
        else:
            header_pipes = None
        assert not line.lstrip("> ").startswith(("# heading", "<script")), f"input starts a line: {line}"


@pytest.fixture(scope="module")
def hostile_snapshot(tmp_path_factory):
    path = tmp_path_factory.mktemp("md") / "node.json"
    snap = _hostile("dgx-h100-port-down", EVIL, down=False)
    data = snap.to_dict()
    data["host"]["hostname"] = "node<script>1</script>|x|"
    path.write_text(json.dumps(data), encoding="utf-8")
    return path


@pytest.mark.parametrize("argv", [["check", "--format", "markdown"], ["doctor", "--format", "markdown"],
                                  ["lint", "--format", "markdown", "--env", "NCCL_IB_HCA=<img src=x>|a|`b`"]],
                         ids=["check", "doctor", "lint"])
def test_node_reports_keep_hostile_names_inert(capsys, hostile_snapshot, argv):
    main([argv[0], "--snapshot", str(hostile_snapshot), "--no-config", *argv[1:]])
    out = capsys.readouterr().out
    assert "img src=x" in out, "the hostile names reach no output: the test would prove nothing"
    assert_inert(out)


def test_triage_markdown_keeps_log_markup_inert(capsys, tmp_path):
    log = tmp_path / "evil.log"
    log.write_text(LOG, encoding="utf-8")
    main(["triage", str(log), "--format", "markdown"])
    out = capsys.readouterr().out
    assert "script" in out and "javascript" in out
    assert_inert(out)


def test_cluster_markdown_keeps_hostile_hostnames_inert(capsys, hostile_snapshot, tmp_path):
    for i in range(2):
        data = json.loads(hostile_snapshot.read_text(encoding="utf-8"))
        data["host"]["hostname"] = f"n{i}<img src=x>|`y`|"
        if i:
            data["versions"]["driver"] = "999.<b>1</b>|x"
        (tmp_path / f"n{i}.json").write_text(json.dumps(data), encoding="utf-8")
    main(["cluster", "check", str(tmp_path), "--format", "markdown"])
    out = capsys.readouterr().out
    assert "img src=x" in out
    assert_inert(out)


def test_the_checker_sees_live_markup():
    for bad in ("- <img src=x>", "- [a](javascript:b)", "| a | b |\n|---|---|\n| x | y | z |", "# heading",
                "- \\`<b>`", "- `a` <b>"):
        with pytest.raises(AssertionError):
            assert_inert(bad)
    assert_inert("- \\<img> `<b>` ``a`b`` \\[x]\n| a | b |\n|---|---|\n| x\\|y | z |\n## Findings")
