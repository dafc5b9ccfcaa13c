"""`ncdoc report`: the file is written whole, is self-contained, says what triage says, and bad input
still gives a page (with the failure in place) while bad usage is one line and exit 2."""

from __future__ import annotations

import json
import os
import re
from html.parser import HTMLParser

import pytest

from paths import FIXTURES, SHARED
from ncdoc.cli.main import main

LAUNCH = FIXTURES / "triage" / "launch.sh"
TESTS = FIXTURES / "triage" / "all_reduce_2x8.txt"


class Dom(HTMLParser):
    """Tags, attributes and text of a page, as a browser's parser first sees them."""

    def __init__(self, text: str):
        super().__init__(convert_charrefs=True)
        self.tags: list[tuple[str, dict]] = []
        self.text: list[str] = []
        self.feed(text)

    def handle_starttag(self, tag, attrs):
        self.tags.append((tag, dict(attrs)))

    handle_startendtag = handle_starttag

    def handle_data(self, data):
        self.text.append(data)

    def having(self, tag: str, **attrs) -> list[dict]:
        return [a for t, a in self.tags if t == tag and all(a.get(k) == v for k, v in attrs.items())]

    def with_class(self, cls: str) -> list[tuple[str, dict]]:
        return [(t, a) for t, a in self.tags if cls in (a.get("class") or "").split()]


def report(capsys, tmp_path, *argv, name="r.html"):
    out = tmp_path / name
    rc = main(["report", "-o", str(out), *map(str, argv)])
    cap = capsys.readouterr()
    return rc, out, cap.out, cap.err


def triage_json(capsys, *argv) -> dict:
    main(["triage", "--json", *map(str, argv)])
    return json.loads(capsys.readouterr().out)


def external_urls(dom: Dom) -> list[str]:
    """Every attribute value that names another place: a URL scheme or a protocol-relative path."""
    bad = []
    for tag, attrs in dom.tags:
        for k, v in attrs.items():
            if v and re.match(r"^\s*([a-z][a-z0-9+.-]*:|//)", v, re.I) and not v.startswith("#") \
                    and k not in ("content", "style", "viewbox", "d", "data-label", "title"):
                bad.append(f"<{tag} {k}={v!r}>")
    return bad


def test_example_node_report_is_self_contained_and_counts_what_triage_counts(capsys, tmp_path):
    rc, out, stdout, err = report(capsys, tmp_path, "--example", "dgx-h100-port-down")
    assert rc == 0 and err == ""
    assert stdout.startswith(f"wrote {out} (") and "topology" in stdout
    text = out.read_text()
    dom = Dom(text)
    assert not dom.having("script") and not dom.having("link") and not dom.having("iframe")
    csp = dom.having("meta", **{"http-equiv": "Content-Security-Policy"})
    assert csp and "default-src 'none'" in csp[0]["content"]
    assert external_urls(dom) == []
    data = triage_json(capsys, "--example", "dgx-h100-port-down")
    assert len(dom.with_class("finding")) == len(data["findings"]) > 0
    assert dom.having("p", id="finding-count")[0]["data-count"] == str(len(data["findings"]))
    nodes = [a for t, a in dom.with_class("node") if t == "g"]
    assert len(nodes) == 8 + 12
    assert [a["data-label"] for a in nodes if a["data-state"] == "bad"] == ["NIC4"]     # mlx5_4, down
    verdict = data["verdict"]
    assert f'{verdict["code"]} {verdict["name"]}' in " ".join(dom.text)
    assert len(text.encode()) < 300_000                     # a node report: a few hundred KB at most


def test_triage_inputs_give_findings_with_evidence_fix_env_and_the_rule_docs(capsys, tmp_path):
    rc, out, _, _ = report(capsys, tmp_path, LAUNCH, TESTS, "--example", "h100-roce", "--nodes", "2")
    assert rc == 0
    dom = Dom(out.read_text())
    data = triage_json(capsys, LAUNCH, TESTS, "--example", "h100-roce", "--nodes", "2")
    assert len(dom.with_class("finding")) == len(data["findings"])
    text = " ".join(dom.text)
    for f in data["findings"]:
        assert dom.having("section", id="rules") and dom.having("article", id=f"rule-{f['code']}")
        for e in f["evidence"][:8]:
            assert e["where"] in text
        for name, value in f["env_patch"].items():
            assert (f"export {name}=" in text) if value is not None else (f"unset {name}" in text)
    assert [a["href"] for t, a in dom.tags if t == "a" and a.get("href", "").startswith("#rule-")]
    chart = dom.having("figure", id="busbw-0")[0]
    rows = [line for line in TESTS.read_text().splitlines() if re.match(r"^\s+\d+\s+\d+\s+float", line)]
    assert chart["data-points"] == str(len(rows))


def test_an_input_that_cannot_be_read_is_shown_in_place_and_the_page_still_renders(capsys, tmp_path):
    binary = tmp_path / "core.bin"
    binary.write_bytes(b"\x7fELF\x00\x01\x02" * 200)
    bad_json = tmp_path / "node.json"
    bad_json.write_text('{"schema_version": 1, "gpus": [')
    rc, out, stdout, err = report(capsys, tmp_path, binary, TESTS, "--snapshot", bad_json)
    assert rc == 0, err
    dom = Dom(out.read_text())
    problems = " ".join(dom.text[i] for i in range(len(dom.text)))
    assert "Could not be used" in problems and "core.bin" in problems and "node.json" in problems
    assert dom.having("figure", id="busbw-0"), "the readable nccl-tests file still gives its chart"
    assert "input problem(s) shown in it" in stdout


def test_only_unreadable_inputs_still_write_a_page_that_says_so(capsys, tmp_path):
    binary = tmp_path / "core.bin"
    binary.write_bytes(b"\x00\x01\x02\x03" * 100)
    rc, out, _, _ = report(capsys, tmp_path, binary)
    assert rc == 0
    text = out.read_text()
    assert "Could not be used" in text and "core.bin" in text


@pytest.mark.parametrize("make, words", [
    (lambda p: p.mkdir(), "that is a folder"),
    (lambda p: None, "no such folder"),
])
def test_an_output_that_is_a_directory_or_in_no_folder_is_one_line_and_exit_2(capsys, tmp_path, make, words):
    target = tmp_path / "out.html"
    if words == "no such folder":
        target = tmp_path / "missing" / "out.html"
    make(target)
    rc = main(["report", "--example", "dgx-h100", "-o", str(target)])
    err = capsys.readouterr().err
    assert rc == 2 and words in err and len(err.strip().splitlines()) == 1 and "Traceback" not in err
    assert not (tmp_path / "missing").exists()
    assert [p.name for p in tmp_path.iterdir() if p.name.startswith(".")] == []


def test_an_unwritable_folder_leaves_nothing_behind(capsys, tmp_path):
    if os.geteuid() == 0:
        pytest.skip("root writes through directory permissions; the temp-file path is covered by envfiles")
    folder = tmp_path / "ro"
    folder.mkdir()
    folder.chmod(0o500)
    try:
        rc = main(["report", "--example", "dgx-h100", "-o", str(folder / "r.html")])
        assert rc == 2 and "cannot write" in capsys.readouterr().err
        assert list(folder.iterdir()) == []
    finally:
        folder.chmod(0o700)


def test_an_existing_report_is_replaced_whole(capsys, tmp_path):
    target = tmp_path / "r.html"
    target.write_text("old")
    assert main(["report", "--example", "workstation-2gpu", "-o", str(target)]) == 0
    capsys.readouterr()
    assert target.read_text().startswith("<!DOCTYPE html>")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["r.html"]


@pytest.mark.parametrize("argv, words", [
    ([], "nothing to report on"),
    (["--example", "no-such-machine"], "no-such-machine"),
    (["--example", "dgx-h100", "--nics", "8"], "--nics needs --nic-gbps"),
])
def test_bad_usage_is_one_line_and_exit_2(capsys, tmp_path, argv, words):
    rc = main(["report", "-o", str(tmp_path / "r.html"), *argv])
    err = capsys.readouterr().err
    assert rc == 2 and words in err and "Traceback" not in err
    assert not (tmp_path / "r.html").exists()


def test_json_says_what_was_written(capsys, tmp_path):
    rc, out, stdout, _ = report(capsys, tmp_path, "--example", "dgx-h100-half-rate", "--json")
    data = json.loads(stdout)
    assert rc == 0 and data["schema_version"] == 1 and data["path"] == str(out)
    assert data["bytes"] == len(out.read_bytes()) and data["sections"] == ["findings", "topology"]
    assert data["findings"] == len(Dom(out.read_text()).with_class("finding"))


CASES = ["nccl-1264-hgx-h100-10nic-topo", "nccl-644-mpirun-slow-7GBps-plateau", "deepep-38-ibv-devinfo-port-down"]


@pytest.mark.parametrize("case", CASES)
def test_corpus_cases_render_with_the_findings_triage_gives(capsys, tmp_path, case):
    art = SHARED / "corpus" / case / "artifact.txt"
    if not art.exists():
        pytest.skip("needs ../shared/corpus (third-party evidence, not in the repo)")
    rc, out, _, _ = report(capsys, tmp_path, art)
    assert rc == 0
    dom = Dom(out.read_text())
    assert len(dom.with_class("finding")) == len(triage_json(capsys, art)["findings"])
    assert external_urls(dom) == []


def test_triage_and_doctor_write_the_same_page_with_format_html(capsys):
    assert main(["triage", str(TESTS), "--example", "h100-roce", "--format", "html"]) in (0, 1)
    dom = Dom(capsys.readouterr().out)
    data = triage_json(capsys, TESTS, "--example", "h100-roce")
    assert len(dom.with_class("finding")) == len(data["findings"]) and dom.having("figure", id="busbw-0")
    assert len([a for t, a in dom.with_class("node") if t == "g"]) == 16
    rc = main(["doctor", "--example", "dgx-h100-port-down", "--format", "html"])
    dom = Dom(capsys.readouterr().out)
    main(["doctor", "--example", "dgx-h100-port-down", "--json"])
    data = json.loads(capsys.readouterr().out)
    assert rc == 1 and len(dom.with_class("finding")) == len(data["findings"]) > 0
    assert [a["data-label"] for t, a in dom.with_class("node") if t == "g" and a["data-state"] == "bad"] == ["NIC4"]


def test_triage_text_draws_the_busbw_curve_as_a_sparkline(capsys):
    from ncdoc.report.sparkline import BLOCKS, curve_line, sparkline
    assert sparkline([0, 1, 2, 4, 8]) == BLOCKS[0] + BLOCKS[1] + BLOCKS[2] + BLOCKS[4] + BLOCKS[7]   # 8 levels, rounded
    assert sparkline([1, 2], ascii_only=True).isascii()
    assert curve_line([[8, 0.0], [1 << 30, 100.0]]) == f"busbw 8B..1G {BLOCKS[0]}{BLOCKS[7]} peak 100.0 GB/s at 1G"
    main(["triage", str(TESTS)])
    out = capsys.readouterr().out
    line = next(x for x in out.splitlines() if "busbw 1G..8G" in x)
    assert "peak 177.8 GB/s at 8G" in line and line.endswith("(all_reduce_2x8.txt)")
