"""README keeps the two set-up commands and names every command ncdoc has."""

import re
from pathlib import Path

from ncdoc.cli.main import COMMAND_MODULES, build_parser

README = (Path(__file__).resolve().parent.parent / "README.md").read_text()


def test_readme_has_the_two_setup_commands():
    assert "pip install -e . && .venv/bin/ncdoc demo" in README
    assert "pip install -e '.[test]' && .venv/bin/python -m pytest" in README


def test_readme_mentions_every_command():
    parser = build_parser()
    sub = next(a for a in parser._actions if a.dest == "command")
    assert set(sub.choices) == set(COMMAND_MODULES)
    for name in sub.choices:
        assert re.search(rf"ncdoc {name}\b", README), f"README does not show `ncdoc {name}`"


def test_ci_runs_the_readme_test_command():
    ci = (Path(__file__).resolve().parent.parent / ".ci" / "run").read_text()
    assert "install --quiet -e '.[test]'" in ci and "-m pytest" in ci and "ncdoc demo" in ci
    assert "python3.10" in ci, "CI runs the suite on the oldest supported Python too"
