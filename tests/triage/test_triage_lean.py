"""A triage of a short log is mostly start-up, so it imports only what that log needs: no dataclasses
(the records are ncdoc.startup.record's), no tabulate and importlib.metadata (nothing prints a table),
none of the readers of report kinds the log does not hold, and compiles only the patterns it uses.
(Speed itself: benchmarks/log_throughput.py.)"""

from __future__ import annotations

import subprocess
import sys

from paths import FIXTURES, ROOT

LOG = FIXTURES / "logs" / "h200_torchrun_1rank_2_28.log"
# argparse and gettext: a plain triage command line is parsed by ncdoc.cli.fast_args
ABSENT = ("dataclasses", "inspect", "typing", "tabulate", "importlib.metadata", "statistics", "yaml", "argparse",
          "gettext",
          "ncdoc.evidence.ras_report", "ncdoc.evidence.ras_model", "ncdoc.evidence.nccl_diag",
          "ncdoc.evidence.parallel_scan", "multiprocessing", "ncdoc.checks.node", "ncdoc.checks.topology")


def _run(argv: list[str]) -> tuple[list[str], int, str]:
    code = ("import re, sys\n"
            "compiled = []\n"
            "real = re._compile\n"
            "def counting(pattern, flags):\n"
            "    if (pattern, flags) not in compiled:\n"
            "        compiled.append((pattern, flags))\n"
            "    return real(pattern, flags)\n"
            "re._compile = counting\n"
            "base = set(sys.modules)\n"
            "from ncdoc.cli.main import main\n"
            "rc = main(%r)\n"
            "print('LOADED', sorted(set(sys.modules) - base))\n"
            "print('PATTERNS', len(compiled))\n" % (argv,))
    p = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120, cwd=ROOT)
    out = p.stdout.splitlines()
    loaded = eval(next(x for x in out if x.startswith("LOADED"))[len("LOADED "):])
    return loaded, int(next(x for x in out if x.startswith("PATTERNS")).split()[1]), p.stderr


def test_a_short_log_imports_only_what_it_needs():
    loaded, patterns, err = _run(["triage", str(LOG)])
    bad = [m for m in ABSENT if m in loaded]
    assert not bad, f"a short log's triage imported {bad}\n{err}"
    # every parser on the way holds ~200 patterns; a healthy log needs about half of them
    assert patterns < 130, patterns


def test_a_short_log_as_json_imports_no_table_printer():
    loaded, _, err = _run(["triage", str(LOG), "--json"])
    assert "tabulate" not in loaded and "importlib.metadata" not in loaded, err
