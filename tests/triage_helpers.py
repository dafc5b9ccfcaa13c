"""Running `ncdoc triage --json` on a text written by a test, as a user would on a file."""

from __future__ import annotations

import json
from pathlib import Path

from ncdoc.cli.main import main


def triage(tmp_path: Path, capsys, text: str, *argv: str) -> tuple[dict, str]:
    """(the JSON document, the file's path) for `text` saved as job.log; exit 0 or 1 and nothing on stderr."""
    path = tmp_path / "job.log"
    path.write_text(text)
    rc = main(["triage", str(path), "--json", *argv])
    out, err = capsys.readouterr()
    assert rc in (0, 1) and err == "", err
    return json.loads(out), str(path)


def named(doc: dict, name: str) -> list[dict]:
    return [f for f in doc["findings"] if f["name"] == name]
