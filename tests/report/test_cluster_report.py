"""The cluster grid: `ncdoc report --cluster` over what `ncdoc cluster check` reads or writes, and
`ncdoc cluster check --format html`: the odd cells are the drift's odd nodes, alike nodes share a row,
1,024 nodes stay a small page, hostile hostnames and values stay text, bad input is shown in place."""

from __future__ import annotations

import json

import pytest

from cluster_inputs import cluster_test_results, facts, write_snapshots
from test_report_cmd import Dom, external_urls
from ncdoc.cli.main import main


@pytest.fixture(scope="module")
def snaps(tmp_path_factory):
    folder = tmp_path_factory.mktemp("snaps64")
    drift = write_snapshots(folder)
    return folder, drift


def page(capsys, tmp_path, *argv, name="c.html"):
    out = tmp_path / name
    rc = main(["report", "-o", str(out), *map(str, argv)])
    cap = capsys.readouterr()
    assert rc == 0, cap.err
    return out, Dom(out.read_text()), cap.out


def table(dom: Dom, tid: str) -> list[tuple[str, dict]]:
    """The start tags inside the table with this id, in order."""
    start = next(i for i, (t, a) in enumerate(dom.tags) if t == "table" and a.get("id") == tid)
    out = []
    for t, a in dom.tags[start + 1:]:
        if t == "table":
            break
        out.append((t, a))
    return out


def odd_cells(dom: Dom, tid: str) -> int:
    return sum(1 for t, a in table(dom, tid) if t == "td" and a.get("data-odd") == "1")


def check_json(capsys, *argv) -> dict:
    main(["cluster", "check", "--json", *map(str, argv)])
    return json.loads(capsys.readouterr().out)


def test_a_folder_of_64_snapshots_is_a_grid_of_the_drift(snaps, capsys, tmp_path):
    folder, drift = snaps
    out, dom, said = page(capsys, tmp_path, "--cluster", folder)
    assert "cluster" in said
    odd_nodes = {n for d in drift.values() for n in d.odd}
    assert odd_nodes == {"node04", "node07", "node11", "node40"}
    # every node has its row, and the odd cells are the drift's odd nodes, attribute by attribute
    rows = [a for t, a in table(dom, "cluster-grid") if t == "tr" and "data-node" in a]
    assert len(rows) == 64
    assert odd_cells(dom, "cluster-grid") == sum(len(d.odd) for d in drift.values()) == 4
    heads = [a["data-key"] for t, a in table(dom, "cluster-grid") if t == "th" and "data-key" in a]
    assert heads == list(drift)
    # alike nodes share a row: the 60 as the reference, and one row for each odd node
    groups = [a for t, a in table(dom, "cluster-groups") if t == "tr" and "data-count" in a]
    assert sorted(int(g["data-count"]) for g in groups) == [1, 1, 1, 1, 60]
    assert odd_cells(dom, "cluster-groups") == 4
    text = "".join(dom.text)                     # (the hostlist may break after each comma: <wbr>)
    assert "node[01-03,05-06,08-10,12-39,41-64]" in text and "2.19.3" in text and "200 Gb/s" in text
    # the cross-node findings are the page's findings, as many as cluster check --json gives
    data = check_json(capsys, folder)
    assert len(dom.with_class("finding")) == len(data["findings"]) == 4
    assert dom.having("p", id="finding-count")[0]["data-count"] == "4"
    assert external_urls(dom) == [] and not dom.having("script")
    assert len(out.read_bytes()) < 120_000


def test_the_json_of_cluster_check_draws_the_same_grid(snaps, capsys, tmp_path):
    folder, drift = snaps
    _, a, _ = page(capsys, tmp_path, "--cluster", folder, name="a.html")
    j = tmp_path / "check.json"
    j.write_text(json.dumps(check_json(capsys, folder)))
    _, b, _ = page(capsys, tmp_path, "--cluster", j, name="b.html")
    for tid in ("cluster-groups", "cluster-grid"):
        assert odd_cells(a, tid) == odd_cells(b, tid) == 4
    assert len(b.with_class("finding")) == len(a.with_class("finding"))
    ga = [x.get("title") for t, x in table(a, "cluster-groups") if t == "th" and x.get("scope") == "row"]
    gb = [x.get("title") for t, x in table(b, "cluster-groups") if t == "th" and x.get("scope") == "row"]
    assert ga == gb


def test_cluster_check_writes_the_page_with_format_html(snaps, capsys):
    folder, drift = snaps
    rc = main(["cluster", "check", str(folder), "--format", "html"])
    dom = Dom(capsys.readouterr().out)
    assert rc == 1                          # a peermem drift is an error, as in text
    assert odd_cells(dom, "cluster-grid") == 4
    assert dom.having("body", **{"data-kind": "cluster"})
    main(["cluster", "check", str(folder), "--golden", "node04", "--format", "html"])
    dom = Dom(capsys.readouterr().out)
    # against node04 (NCCL_IB_HCA unset there) the 63 others are odd on that attribute
    assert "golden node node04" in " ".join(dom.text)
    assert odd_cells(dom, "cluster-grid") >= 63


def test_a_thousand_nodes_stay_a_few_rows(tmp_path):
    from ncdoc.cluster.report import check_cluster
    from ncdoc.engine.selection import resolve
    from ncdoc.report.build import cluster_page
    f = facts(1024, patch={f"node{i:04d}": {"hcas.hcas.0.fw_ver": "28.36.1010"} for i in range(1, 1025, 97)},
              env={})
    sel = resolve(default_fail_on="error", no_config=True)
    html = cluster_page(f, check_cluster(f, sel), {r.code: r.stage for r in sel.rules}, title="1024")
    dom = Dom(html)
    groups = [a for t, a in table(dom, "cluster-groups") if t == "tr" and "data-count" in a]
    assert sorted(int(g["data-count"]) for g in groups) == [11, 1013]
    assert not any(a.get("id") == "cluster-grid" for t, a in dom.tags)   # no per-node table past 256 nodes
    assert "1024 nodes: the grid above is the grid" in " ".join(dom.text)
    assert len(html.encode()) < 150_000


HOSTILE = ["<script>alert(1)</script>", '"><img src=x onerror=alert(2)>', "javascript:alert(3)"]


def test_hostile_hostnames_and_values_stay_text(tmp_path, capsys):
    folder = tmp_path / "snaps"
    write_snapshots(folder, nodes=6, patch={"node02": {"host.kernel": HOSTILE[1]}},
                    env={"node03": {"NCCL_SOCKET_IFNAME": HOSTILE[2]}},
                    hostnames={"node05": HOSTILE[0], "node06": "gpu\x1b[31m06"})
    out, dom, _ = page(capsys, tmp_path, "--cluster", folder)
    html = out.read_text()
    assert not dom.having("script") and not dom.having("img")
    assert all(not k.startswith("on") for _, a in dom.tags for k in a)
    assert external_urls(dom) == []
    text = " ".join(dom.text) + " ".join(v or "" for _, a in dom.tags for v in a.values())
    for p in HOSTILE:
        assert p in text
    assert "\x1b" not in html and "gpu\\x1b[31m06" in text


def test_bad_cluster_input_still_renders_with_the_failure_in_place(tmp_path, capsys):
    folder = tmp_path / "snaps"
    write_snapshots(folder, nodes=4, env={"node02": {"NCCL_IB_HCA": None}})
    (folder / "broken.json").write_text("{ not json")
    old = json.loads((folder / "n0003.json").read_text())
    old["schema_version"] = 0
    (folder / "n0003.json").write_text(json.dumps(old))
    _, dom, said = page(capsys, tmp_path, "--cluster", folder)
    problems = [x for x in " ".join(dom.text).split("\n") if x]
    text = " ".join(problems)
    assert "Could not be used" in text and "broken.json" in text and "schema_version" in text
    assert "input problem" in said
    assert [a["data-node"] for t, a in table(dom, "cluster-grid") if t == "tr" and "data-node" in a] == [
        "node01", "node02", "node03"]                      # node04's file is the old one
    for content, words in (("[1, 2]", "no usable node snapshot"), ('{"facts": {"drift": 1}}', "no drift matrix"),
                           ("{", "no usable node snapshot")):
        f = tmp_path / "x.json"
        f.write_text(content)
        _, dom, _ = page(capsys, tmp_path, "--cluster", f)
        assert words in " ".join(dom.text)
    _, dom, _ = page(capsys, tmp_path, "--cluster", tmp_path / "nowhere")
    assert "no such file" in " ".join(dom.text)
    bad = tmp_path / "results.json"
    bad.write_text('{"kind": "something else"}')
    _, dom, _ = page(capsys, tmp_path, "--cluster-test", bad)
    assert "not the results of ncdoc cluster test" in " ".join(dom.text)


def test_cluster_test_results_name_the_bad_node_and_rail(tmp_path, capsys):
    results = cluster_test_results(tmp_path, capsys)
    doc = json.loads(results.read_text())
    _, dom, said = page(capsys, tmp_path, "--cluster-test", results)
    assert "cluster tests" in said
    faults = [a for t, a in dom.tags if t == "article" and "fault" in (a.get("class") or "")]
    assert [a["data-kind"] for a in faults] == [f["kind"] for f in doc["findings"]]
    assert {f["subject"] for f in doc["findings"]} >= {"node03", "node09:mlx5_3"}
    text = " ".join(dom.text)
    assert "scontrol update NodeName=node03 State=DRAIN" in text
    rows = {a["data-count"]: a for t, a in table(dom, "cluster-test-grid") if t == "tr" and "data-count" in a}
    assert "BAD NODE" in text and "BAD RAIL mlx5_3" in text
    named = [x for t, x in table(dom, "cluster-test-grid") if t == "th" and x.get("scope") == "row"]
    assert len(named) >= 3 and int(max(rows, key=int)) >= 10      # the healthy nodes share one row


def test_an_inconclusive_triage_says_what_would_decide_it(capsys, tmp_path):
    from paths import FIXTURES
    tests = FIXTURES / "triage" / "all_reduce_2x8.txt"
    main(["triage", "--json", str(tests)])
    data = json.loads(capsys.readouterr().out)
    assert data["verdict"] is None and data["conclusion"]["state"] == "inconclusive"
    _, dom, _ = page(capsys, tmp_path, tests)
    verdict = dom.having("section", id="verdict")[0]
    assert verdict["data-state"] == "inconclusive" and "inconclusive" in verdict["class"]
    text = " ".join(dom.text)
    assert "INCONCLUSIVE" in text and "No problem found in what was given" not in text
    for need in data["conclusion"]["needs"]:
        assert need in text
