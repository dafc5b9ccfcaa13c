"""Site policy packs, the config file, and rule selection (--select, --ignore, --severity, --fail-on)."""

from __future__ import annotations

import pytest

from ncdoc.errors import InputError, UsageError
from ncdoc.engine.policy import load_config, load_policy, parse_policy
from ncdoc.engine.selection import resolve
from paths import ROOT



@pytest.mark.parametrize("name", ["ib-cluster", "roce-cluster"])
def test_shipped_packs_load(name):
    pol = load_policy(ROOT / "rules" / "policies" / f"{name}.yaml")
    assert pol.name == name and pol.entries and all(e.reason for e in pol.entries)


def _write(tmp_path, text, name="site.yaml"):
    p = tmp_path / name
    p.write_text(text)
    return p


@pytest.mark.parametrize("body, line, words", [
    ("policy: s\nvariables:\n  - var: NCCL_IB_TC\n    level: enforced\n    valeu: '106'\n    reason: r\n", 5,
     "unknown key 'valeu'"),
    ("policy: s\nvariables:\n  - var: NCCL_IB_TC\n    level: mandatory\n    reason: r\n", 4, "level"),
    ("policy: s\nvariables:\n  - var: NCCL_IB_TC\n    level: enforced\n    value: '1'\n", 3, "reason"),
    ("policy: s\nvariables:\n  - var: NCCL_IB_TC\n    level: enforced\n    value: '1'\n    range: [1, 2]\n"
     "    reason: r\n", 3, "only one of"),
    ("policy: s\nvariables:\n  - var: NCCL_IB_TC\n    level: enforced\n    when: {ncl: '>=2.21'}\n    reason: r\n",
     5, "unknown key 'ncl'"),
    ("policy: s\nvariables:\n  - var: NCCL_IB_TC\n    level: enforced\n    when: {nccl: 'newer'}\n    reason: r\n",
     5, "version"),
    ("policy: s\nrules: []\n", 2, "unknown key 'rules'"),
])
def test_bad_policy_names_file_line_and_key(tmp_path, body, line, words):
    p = _write(tmp_path, body)
    with pytest.raises(InputError) as err:
        load_policy(p)
    msg = str(err.value)
    assert msg.startswith(f"{p}:{line}:") and words in msg, msg


def test_entry_semantics():
    from ncdoc.engine.policy import applies, satisfies
    pol = parse_policy({"policy": "t", "hosts": ["gpu-*"], "variables": [
        {"var": "NCCL_IB_TIMEOUT", "level": "recommended", "range": [20, 23], "reason": "r"},
        {"var": "NCCL_NET_PLUGIN", "level": "forbidden", "when": {"plugin": "ofi>=1.9"}, "reason": "r"},
    ]}, "t")
    timeout, plugin = pol.entries
    assert satisfies(timeout, "0x14") and not satisfies(timeout, "24") and not satisfies(timeout, "abc")
    assert applies(timeout, {"hostname": "gpu-7"}) == (True, "")
    assert applies(timeout, {"hostname": "cpu-7"}) == (False, "")
    assert applies(timeout, {})[0] is None
    assert applies(plugin, {"hostname": "gpu-1", "net_plugins": ["/opt/aws-ofi-nccl-1.9.2/lib/libnccl-net.so"]})[0]
    assert applies(plugin, {"hostname": "gpu-1", "net_plugins": ["/opt/aws-ofi-nccl-1.8.0/lib/libnccl-net.so"]})[0] \
        is False
    assert applies(plugin, {"hostname": "gpu-1", "net_plugins": ["/opt/ofi/lib/libnccl-net.so"]})[0] is None


def test_config_file_toml_and_yaml(tmp_path):
    _write(tmp_path, "policy: s\nvariables:\n  - {var: NCCL_IB_TC, level: enforced, value: '106', reason: r}\n",
           "site.yaml")
    cfg_path = _write(tmp_path, 'rules = ["site.yaml"]\nselect = ["NC1"]\nfail-on = "warning"\n'
                                '[ignore]\nNC1004 = "pinned until 2.24"\n[severity]\nNC1005 = "error"\n', "ncdoc.toml")
    sub = tmp_path / "a" / "b"
    sub.mkdir(parents=True)
    cfg = load_config(start=str(sub))                          # found from a folder below
    assert cfg.path == str(cfg_path) and cfg.select == ["NC1"] and cfg.fail_on == "warning"
    assert cfg.rules == [str(tmp_path / "site.yaml")]
    sel = resolve(config=str(cfg_path), environ={})
    assert {r.family for r in sel.rules} == {"env"}
    assert "NC1004" not in {r.code for r in sel.rules} and sel.ignored[0][1] == "pinned until 2.24"
    assert sel.overrides == {"NC1005": "error"} and sel.fail_on == "warning" and sel.policies[0].name == "s"
    y = _write(tmp_path, "select: [NC4]\nfail-on: info\n", ".ncdoc.yaml")
    assert load_config(str(y)).select == ["NC4"]


def test_config_errors_name_the_file(tmp_path):
    bad = _write(tmp_path, "selekt: [NC1]\n", ".ncdoc.yaml")
    with pytest.raises(InputError, match=rf"{bad}:1: unknown key 'selekt'"):
        load_config(str(bad))
    no_reason = _write(tmp_path, "ignore: {NC1004: ''}\n", "x.yaml")
    with pytest.raises(InputError, match="needs a reason"):
        load_config(str(no_reason))
    unknown = _write(tmp_path, "select: [NC9999]\n", "y.yaml")
    with pytest.raises(InputError, match=r"y\.yaml.*NC9999"):
        resolve(config=str(unknown), environ={})


def test_cli_selection_rules():
    sel = resolve(select=["NC11", "port-down"], no_config=True, environ={})
    assert {r.code[:4] for r in sel.rules} <= {"NC11", "NC40"} and "port-down" in {r.name for r in sel.rules}
    with pytest.raises(UsageError, match="reason"):
        resolve(ignore=["NC1004"], no_config=True, environ={})
    with pytest.raises(UsageError, match="NC9999"):
        resolve(select=["NC9999"], no_config=True, environ={})
    with pytest.raises(UsageError, match="CODE=info"):
        resolve(severity=["NC1004=loud"], no_config=True, environ={})
    sel = resolve(fail_on=None, no_config=True, environ={"NCDOC_FAIL_ON": "info"})
    assert sel.fail_on == "info"
    assert resolve(fail_on="none", no_config=True, environ={"NCDOC_FAIL_ON": "info"}).fail_on == "none"


def test_ncdoc_rules_env_loads_packs(tmp_path):
    p = _write(tmp_path, "policy: s\nvariables:\n  - {var: NCCL_IB_TC, level: enforced, value: '106', reason: r}\n")
    sel = resolve(no_config=True, environ={"NCDOC_RULES": str(p)})
    assert [x.name for x in sel.policies] == ["s"]


def test_severity_override_and_off():
    from ncdoc.engine.rules import Context
    from ncdoc.snapshot import EnvValue, NcclEnv, Status
    env = NcclEnv(Status.ok("t"), (EnvValue("NCCL_ALGO", "Ring", "env"),))
    sel = resolve(select=["debug-var-in-production"], severity=["NC1005=error"], no_config=True, environ={})
    (f,) = sel.run(Context(env=env)).findings
    assert f.severity == "error"
    sel = resolve(select=["debug-var-in-production"], severity=["NC1005=off"], no_config=True, environ={})
    assert sel.run(Context(env=env)).findings == ()
