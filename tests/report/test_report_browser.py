"""Each report kind in a real browser: headless Chromium loads the file with the network closed and
no request leaves the page; the DOM has one topology node per GPU and NIC, one chart point per
measured size, as many findings as the JSON; a screenshot of each is kept.

Screenshots go to $NCDOC_SCREENSHOTS when set (to look at them), else to the test's temp folder.
"""

from __future__ import annotations

import json
import os
import re
from pathlib import Path

import pytest

from paths import FIXTURES, SHARED
from report_browser import Browser, find_chromium, why_no_chromium
from ncdoc.cli.main import main

CHROMIUM = find_chromium()
pytestmark = pytest.mark.skipif(CHROMIUM is None, reason=why_no_chromium())

TESTS = FIXTURES / "triage" / "all_reduce_2x8.txt"
LAUNCH = FIXTURES / "triage" / "launch.sh"

# What the page may hold, checked in the browser's own DOM after it ran: no script, no handler,
# no attribute naming another place (only #fragment links).
DOM_FACTS = r"""(() => {
  const all = [...document.querySelectorAll('*')];
  const handlers = all.flatMap(e => [...e.attributes].filter(a => /^on/i.test(a.name)).map(a => e.tagName + ' ' + a.name));
  const urls = all.flatMap(e => [...e.attributes].filter(a => !['content', 'style', 'd', 'viewBox', 'data-label', 'xmlns']
      .includes(a.name) && /^\s*([a-z][a-z0-9+.-]*:|\/\/)/i.test(a.value)).map(a => e.tagName + ' ' + a.name + '=' + a.value));
  const chart = id => { const g = document.getElementById(id); return g ? g.querySelectorAll('use').length : null; };
  return {
    scripts: document.querySelectorAll('script').length, handlers, urls,
    embeds: document.querySelectorAll('img, iframe, object, embed, link, audio, video, source').length,
    nodes: document.querySelectorAll('svg.topology g.node').length,
    gpus: document.querySelectorAll('svg.topology g.node.gpu').length,
    nics: document.querySelectorAll('svg.topology g.node.nic').length,
    bad: [...document.querySelectorAll('svg.topology g.node[data-state=bad]')].map(g => g.dataset.label),
    findings: document.querySelectorAll('#findings article.finding').length,
    count: (document.getElementById('finding-count') || {dataset: {}}).dataset.count,
    busbw: chart('busbw-0-series-0'),
    history: document.querySelectorAll('#tune-history [id^="tune-history-complete"] use').length,
    early: document.querySelectorAll('#tune-history [id="tune-history-stopped-early"] use').length,
    odd: document.querySelectorAll('#cluster-grid td[data-odd]').length,
    groups: [...document.querySelectorAll('#cluster-groups tbody tr[data-count]')].map(r => +r.dataset.count),
    nodeRows: document.querySelectorAll('#cluster-grid tbody tr[data-node]').length,
    faults: [...document.querySelectorAll('#cluster article.fault')].map(a => a.dataset.kind),
    verdictState: (document.getElementById('verdict') || {dataset: {}}).dataset.state,
    problems: [...document.querySelectorAll('#problems li')].map(li => li.innerText),
    text: document.body.innerText,
    width: document.documentElement.scrollWidth,
  };
})()"""


def shots_dir(tmp_path: Path) -> Path:
    d = Path(os.environ.get("NCDOC_SCREENSHOTS") or tmp_path)
    d.mkdir(parents=True, exist_ok=True)
    return d


@pytest.fixture(scope="module")
def browser():
    with Browser(CHROMIUM) as b:
        yield b


def write_report(tmp_path: Path, capsys, name: str, *argv) -> Path:
    out = tmp_path / f"{name}.html"
    assert main(["report", "-o", str(out), *map(str, argv)]) == 0
    capsys.readouterr()
    return out


def triage_json(capsys, *argv) -> dict:
    main(["triage", "--json", *map(str, argv)])
    return json.loads(capsys.readouterr().out)


def topo_counts(capsys, *argv) -> tuple[int, int]:
    main(["topo", "--json", *map(str, argv)])
    facts = json.loads(capsys.readouterr().out)["facts"]
    labels = list(facts["matrix"])
    return sum(1 for x in labels if x.startswith("GPU")), sum(1 for x in labels if not x.startswith("GPU"))


def load(browser, path: Path, shots: Path, **kw) -> dict:
    url = path.resolve().as_uri()
    page = browser.open(url, **kw)
    try:
        facts = page.eval(DOM_FACTS)
        facts["requests"] = page.requests()
        shot = page.screenshot(str(shots / (path.stem + ("-print" if kw.get("print_media") else "") + ".png")))
    finally:
        page.close()
    assert facts["requests"] == [url], "the page asked for more than itself"
    assert facts["scripts"] == 0 and facts["handlers"] == [] and facts["embeds"] == 0
    assert facts["urls"] == []
    assert facts["width"] <= 1280, "the page scrolls sideways at laptop width"
    png = Path(shot).read_bytes()
    assert png[:8] == b"\x89PNG\r\n\x1a\n" and int.from_bytes(png[16:20], "big") == 1280
    return facts


def test_the_network_is_closed_for_the_browser(browser):
    if not browser.isolated:
        pytest.skip("unshare -n is not permitted here; offline emulation and a dead proxy still apply")
    assert browser.isolated


def test_node_report(browser, capsys, tmp_path):
    out = write_report(tmp_path, capsys, "node-dgx-h100-port-down", "--example", "dgx-h100-port-down")
    f = load(browser, out, shots_dir(tmp_path))
    gpus, nics = topo_counts(capsys, "--example", "dgx-h100-port-down")
    assert (f["gpus"], f["nics"]) == (gpus, nics) == (8, 12)
    assert f["bad"] == ["NIC4"]
    data = triage_json(capsys, "--example", "dgx-h100-port-down")
    assert f["findings"] == int(f["count"]) == len(data["findings"])
    assert "mlx5_4" in f["text"] and "port 1 DOWN" in f["text"]


def test_triage_report_with_a_bandwidth_curve(browser, capsys, tmp_path):
    argv = (LAUNCH, TESTS, "--example", "h100-roce", "--nodes", "2")
    out = write_report(tmp_path, capsys, "triage-h100-roce", *argv)
    f = load(browser, out, shots_dir(tmp_path))
    rows = [x for x in TESTS.read_text().splitlines() if re.match(r"^\s+\d+\s+\d+\s+float", x)]
    assert f["busbw"] == len(rows) > 0
    assert f["findings"] == len(triage_json(capsys, *argv)["findings"])
    assert (f["gpus"], f["nics"]) == topo_counts(capsys, "--example", "h100-roce")
    f = load(browser, out, shots_dir(tmp_path), print_media=True)
    assert f["findings"] > 0


def test_corpus_case_reports(browser, capsys, tmp_path):
    cases = ["nccl-1264-hgx-h100-10nic-topo", "nccl-644-mpirun-slow-7GBps-plateau"]
    arts = [SHARED / "corpus" / c / "artifact.txt" for c in cases]
    if not all(a.exists() for a in arts):
        pytest.skip("needs ../shared/corpus (third-party evidence, not in the repo)")
    out = write_report(tmp_path, capsys, "corpus-nccl-1264", arts[0])
    f = load(browser, out, shots_dir(tmp_path))
    assert (f["gpus"], f["nics"]) == topo_counts(capsys, arts[0]) == (8, 10)
    assert f["findings"] == len(triage_json(capsys, arts[0])["findings"])
    out = write_report(tmp_path, capsys, "corpus-nccl-644", arts[1])
    f = load(browser, out, shots_dir(tmp_path))
    data = triage_json(capsys, arts[1])
    curve = next(s["facts"]["curve"] for s in data["facts"]["sources"] if s["kind"] == "nccl_tests")
    assert f["busbw"] == len(curve) > 0 and f["findings"] == len(data["findings"])


def test_cluster_report_of_64_nodes_with_the_test_results(browser, capsys, tmp_path):
    from cluster_inputs import cluster_test_results, write_snapshots
    snaps = tmp_path / "snaps"
    drift = write_snapshots(snaps)
    results = cluster_test_results(tmp_path, capsys)
    out = write_report(tmp_path, capsys, "cluster-64-nodes", "--cluster", snaps, "--cluster-test", results)
    f = load(browser, out, shots_dir(tmp_path))
    assert f["odd"] == sum(len(d.odd) for d in drift.values()) == 4 and f["nodeRows"] == 64
    assert sorted(f["groups"]) == [1, 1, 1, 1, 60]
    main(["cluster", "check", "--json", str(snaps)])
    assert f["findings"] == int(f["count"]) == len(json.loads(capsys.readouterr().out)["findings"])
    doc = json.loads(results.read_text())
    assert f["faults"] == [x["kind"] for x in doc["findings"]] and "node03" in f["text"]
    f = load(browser, out, shots_dir(tmp_path), print_media=True)
    assert f["odd"] == 4


def test_cluster_check_page_with_hostile_hostnames_and_bad_files(browser, capsys, tmp_path):
    from cluster_inputs import write_snapshots
    from test_report_injection import PAYLOADS
    snaps = tmp_path / "snaps"
    write_snapshots(snaps, nodes=6, patch={"node02": {"host.kernel": PAYLOADS[1]}},
                    env={"node03": {"NCCL_SOCKET_IFNAME": PAYLOADS[3]}}, hostnames={"node05": PAYLOADS[0]})
    (snaps / "broken.json").write_text("{ not json")
    out = tmp_path / "cluster-hostile.html"
    assert main(["cluster", "check", str(snaps), "--format", "html"]) == 2      # bad input: exit 2, page written
    out.write_text(capsys.readouterr().out)
    f = load(browser, out, shots_dir(tmp_path))
    for p in (PAYLOADS[0], PAYLOADS[1], PAYLOADS[3]):
        assert p in f["text"]
    assert any("broken.json" in p for p in f["problems"]) and f["nodeRows"] == 6


def test_inconclusive_triage_report(browser, capsys, tmp_path):
    out = write_report(tmp_path, capsys, "triage-inconclusive", TESTS)
    f = load(browser, out, shots_dir(tmp_path))
    assert f["verdictState"] == "inconclusive" and "INCONCLUSIVE" in f["text"] and "--nic-gbps" in f["text"]
    assert f["busbw"] > 0


def test_hostile_input_stays_text_in_the_browser(browser, capsys, tmp_path):
    from test_report_injection import LOG, PAYLOADS
    log = tmp_path / "evil.log"
    log.write_text(LOG)
    out = write_report(tmp_path, capsys, "injection", log, "--env", f"NCCL_SOCKET_IFNAME={PAYLOADS[2]}",
                       "--title", PAYLOADS[0])
    f = load(browser, out, shots_dir(tmp_path))
    for p in PAYLOADS:
        assert p in f["text"]


@pytest.mark.ray
@pytest.mark.slow
def test_tune_report(browser, ray_runtime, capsys, tmp_path):
    tune = tmp_path / "tune"
    assert main(["tune", "--preset", "h100-roce-2node", "--trials", "12", "--repeats", "2", "--confirm-pairs", "5",
                 "--top-k", "1", "--out", str(tune), "--format", "html"]) in (0, 1)
    said = capsys.readouterr().out
    out = tune / "report.html"
    assert f"The tuning story, on one page: {out}" in said
    shot = tmp_path / "tune-h100-roce-2node.html"
    shot.write_bytes(out.read_bytes())
    f = load(browser, shot, shots_dir(tmp_path))
    summary = json.loads((tune / "summary.json").read_text())
    assert f["history"] == summary["trials_complete"]
    assert f["early"] == summary["trials_stopped_early"]
    assert "SIMULATED" in f["text"] and f"optuna-dashboard {tune / 'study.journal'}" in f["text"]
    assert "metric busbw_vs_baseline" in f["text"]          # the study names its objective (innerText)
