"""The one reader of user-given files: why a file cannot be used is one line naming it, worded the
same by every command and option that takes a file."""

from __future__ import annotations

import io
import sys

import pytest

from ncdoc.cli.main import main
from ncdoc.errors import InputError
from ncdoc.readers.textfile import read_user_text


def test_reasons(tmp_path):
    with pytest.raises(InputError, match="no such file"):
        read_user_text(tmp_path / "missing.txt")
    with pytest.raises(InputError, match="is a directory"):
        read_user_text(tmp_path)
    (tmp_path / "empty").write_text("")
    with pytest.raises(InputError, match="is empty"):
        read_user_text(tmp_path / "empty")
    assert read_user_text(tmp_path / "empty", empty_ok=True) == ""
    (tmp_path / "blank").write_text(" \n\t\n")
    with pytest.raises(InputError, match="is empty"):
        read_user_text(tmp_path / "blank")
    (tmp_path / "bin").write_bytes(bytes(range(256)) * 4)
    with pytest.raises(InputError, match="binary"):
        read_user_text(tmp_path / "bin")
    (tmp_path / "latin1").write_bytes("caf\xe9 ".encode("latin-1") * 50)
    with pytest.raises(InputError, match="UTF-8"):
        read_user_text(tmp_path / "latin1")
    (tmp_path / "big").write_bytes(b"x" * 2048)
    with pytest.raises(InputError, match="larger than"):
        read_user_text(tmp_path / "big", max_bytes=1024)


def test_text_is_returned_without_its_bom_and_with_a_stray_byte(tmp_path):
    (tmp_path / "ok").write_bytes(b"\xef\xbb\xbfGPU0\t X \n\xff")   # one stray byte is tolerated
    assert read_user_text(tmp_path / "ok") == "GPU0\t X \n\ufffd"


def test_stdin(monkeypatch):
    monkeypatch.setattr(sys, "stdin", io.TextIOWrapper(io.BytesIO(b"NCCL_DEBUG=INFO\n")))
    assert read_user_text("-") == "NCCL_DEBUG=INFO\n"
    monkeypatch.setattr(sys, "stdin", io.TextIOWrapper(io.BytesIO(b"")))
    with pytest.raises(InputError, match="^<stdin>: is empty"):
        read_user_text("-")


# every option that names a file the user wrote or captured
COMMANDS = [
    lambda f: ["check", "--no-config", "--snapshot", f],
    lambda f: ["doctor", "--no-config", "--snapshot", f],
    lambda f: ["lint", "--no-config", "--env-file", f],
    lambda f: ["lint", "--no-config", "--env", "NCCL_DEBUG=WARN", "--rules", f],
    lambda f: ["lint", "--env", "NCCL_DEBUG=WARN", "--config", f],
    lambda f: ["env", "show", "--env-file", f],
    lambda f: ["topo", f],
    lambda f: ["triage", f],
]
IDS = ["check --snapshot", "doctor --snapshot", "lint --env-file", "lint --rules", "lint --config",
       "env show --env-file", "topo", "triage"]


@pytest.mark.parametrize("command", COMMANDS, ids=IDS)
@pytest.mark.parametrize("bad,words", [("missing", "no such file"), ("folder", "is a directory"),
                                       ("binary", "binary (it contains NUL bytes)")])
def test_every_command_says_it_in_the_same_line(capsys, tmp_path, monkeypatch, command, bad, words):
    monkeypatch.chdir(tmp_path)
    path = tmp_path / bad
    if bad == "folder":
        path.mkdir()
    elif bad == "binary":
        path.write_bytes(b"\x7fELF\x02\x01\x01\x00" + bytes(range(256)) * 4)
    rc = main(command(str(path)))
    out, err = capsys.readouterr()
    assert rc == 2 and out == ""
    assert err.startswith(f"ncdoc: error: {path}: ") and words in err, err
    assert len(err.strip().splitlines()) == 1 and "Traceback" not in err


@pytest.mark.parametrize("command", [["env", "generate", "--example", "dgx-h100", "-o"],
                                     ["snapshot", "--example", "dgx-h100", "-o"]], ids=["env generate", "snapshot"])
def test_every_command_writes_whole_files_or_says_why_in_one_line(capsys, tmp_path, command):
    target = tmp_path / "out.txt"
    target.write_text("old\n")
    assert main([*command, str(target)]) == 0
    assert target.read_text() != "old\n" and [p.name for p in tmp_path.iterdir()] == ["out.txt"]
    capsys.readouterr()
    for bad, words in ((tmp_path, "that is a folder"), (tmp_path / "no" / "such.txt", "no such folder")):
        rc = main([*command, str(bad)])
        out, err = capsys.readouterr()
        assert rc == 2 and words in err and len(err.strip().splitlines()) == 1 and "Traceback" not in err


@pytest.mark.parametrize("controls, binary", [
    (b"", False),                         # none at all
    (b"\x01" * 8, False),                 # a few stray ones: at most max(8, 1%) is still text
    (b"\x1b[0m\f\v" * 40, False),         # ANSI colour escapes, form feeds and vertical tabs are text
    (b"\x07" * 9, True),                  # more than 8 and more than 1% of a short file
    (b"\x7f" * 9, True),                  # DEL counts as a control byte
])
def test_control_bytes_make_a_file_binary_past_a_share(tmp_path, controls, binary):
    f = tmp_path / "f.txt"
    f.write_bytes(b"NCCL_DEBUG=INFO\n" * 20 + controls)
    if binary:
        with pytest.raises(InputError, match=r"binary \(control characters\)"):
            read_user_text(f)
    else:
        assert read_user_text(f).startswith("NCCL_DEBUG=INFO")
