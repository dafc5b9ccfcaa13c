"""ncdoc.cli.fast_args parses plain `ncdoc check` and `ncdoc triage` command lines exactly as argparse
does, and hands everything else to argparse."""

import subprocess
import sys

import pytest

from ncdoc.cli import fast_args
from ncdoc.cli.main import build_parser, main


def _argparse(argv):
    return vars(build_parser(only=argv[0]).parse_args(argv))


SIMPLE = [
    [],
    ["--snapshot", "node.json"],
    ["--snapshot=node.json", "--no-config"],
    ["--snapshot", ""],
    ["--snapshot="],
    ["--snapshot=-odd.json"],
    ["--snapshot", "a.json", "--snapshot", "b.json"],
    ["--example", "dgx-h100", "--quiet"],
    ["--example", "dgx-h100", "-q"],
    ["--env", "NCCL_IB_HCA==mlx5_0,mlx5_1", "--env=NCCL_DEBUG=INFO", "--env", "A="],
    ["--env-file", "a.env", "--env-file", "b.conf", "--nccl-version", "2.21.5"],
    ["--rules", "site.yaml", "--config", "ncdoc.toml", "--rules=other.json"],
    ["--select", "NC1,NC4004", "--select", "port-down", "--ignore", "NC1004:pinned on purpose"],
    ["--severity", "NC1004=off", "--severity=NC4004=info", "--fail-on", "warning"],
    ["--fail-on=none", "--format", "json", "--json", "--color", "never"],
    ["--format", "markdown", "--color=always", "--no-config", "--quiet"],
    ["--json", "--json", "-q", "-q"],
]

# Each of these needs argparse: an error message, help, or a rule the fast parser leaves to it.
FALLBACK = [
    ["-h"],
    ["--help"],
    ["--snap", "node.json"],                      # abbreviation
    ["--snapshot"],                               # expected one argument
    ["--snapshot", "--json"],
    ["--snapshot", "a.json", "--example", "dgx-h100"],   # mutually exclusive
    ["--fail-on", "fatal"],                       # invalid choice
    ["--format=yaml"],
    ["--quiet=yes"],                              # store_true takes no value
    ["--nccl-version", "-1"],                     # a negative number: argparse's call
    ["node.json"],                                # no positionals
    ["--", "--json"],
    ["-qq"],
    ["--unknown"],
    ["--env", "-x y"],
]


@pytest.mark.parametrize("argv", SIMPLE, ids=lambda a: " ".join(a) or "(none)")
def test_fast_namespace_equals_argparse(argv):
    fast = fast_args.parse("check", argv)
    assert fast is not None, "a plain command line should not need argparse"
    assert vars(fast) == _argparse(["check", *argv])


@pytest.mark.parametrize("argv", FALLBACK, ids=" ".join)
def test_everything_else_goes_to_argparse(argv):
    assert fast_args.parse("check", argv) is None


# argparse accepts these (abbreviations, -qq, a negative number, a value like "-x y")
VALID_FOR_ARGPARSE = (["-h"], ["--help"], ["--snap", "node.json"], ["--nccl-version", "-1"], ["-qq"], ["--env", "-x y"])


@pytest.mark.parametrize("argv", [a for a in FALLBACK if a not in VALID_FOR_ARGPARSE], ids=" ".join)
def test_usage_errors_keep_argparse_messages(argv, capsys):
    with pytest.raises(SystemExit) as exc:
        main(["check", *argv])
    assert exc.value.code == 2
    assert capsys.readouterr().err.startswith("ncdoc: error: ")


# triage: its evidence files are one run of positionals, anywhere among the options; --nodes and friends
# are numbers
TRIAGE_SIMPLE = [
    [],
    ["job.log"],
    ["job.log", "tests.txt", "launch.sh"],
    ["--json", "job.log", "tests.txt"],
    ["job.log", "tests.txt", "--json"],
    ["--snapshot", "node.json", "job.log", "--format", "markdown"],
    ["--example", "dgx-h100", "--nic-gbps", "400", "--nics", "8", "--nodes", "2", "job.log"],
    ["--nic-gbps=400.5", "--jobs", "2", "-v", "job.log", "--show-skipped", "--fail-on", "warning"],
    ["--env", "NCCL_IB_HCA=mlx5_0", "--env=NCCL_DEBUG=INFO", "job.log", "--color", "never"],
    ["--nodes", " 4", "job.log"],                   # int() takes blanks around a number, as argparse's type=int
    ["--json"],
]
TRIAGE_FALLBACK = [
    ["-"],                                          # stdin: argparse's positional '-'
    ["job.log", "--json", "tests.txt"],             # two runs of positionals
    ["a.log", "--nodes", "2", "b.log"],
    ["--nodes", "two", "job.log"],                  # invalid int value
    ["--nic-gbps", "fast"],
    ["--nodes", "-1", "job.log"],
    ["--", "job.log"],
    ["-h"],
    ["--format", "yaml", "job.log"],
]


@pytest.mark.parametrize("argv", TRIAGE_SIMPLE, ids=lambda a: " ".join(a) or "(none)")
def test_fast_triage_namespace_equals_argparse(argv):
    fast = fast_args.parse("triage", argv)
    assert fast is not None, "a plain triage command line should not need argparse"
    assert vars(fast) == _argparse(["triage", *argv])
    assert fast.paths is not fast_args.parse("triage", argv).paths      # a list of its own each time


@pytest.mark.parametrize("argv", TRIAGE_FALLBACK, ids=" ".join)
def test_other_triage_lines_go_to_argparse(argv):
    assert fast_args.parse("triage", argv) is None


@pytest.mark.parametrize("argv", [["job.log", "--json", "tests.txt"], ["--nodes", "two", "job.log"],
                                  ["--format", "yaml", "job.log"]], ids=" ".join)
def test_triage_usage_errors_keep_argparse_messages(argv, capsys):
    with pytest.raises(SystemExit) as exc:
        main(["triage", *argv])
    assert exc.value.code == 2
    assert capsys.readouterr().err.startswith("ncdoc: error: ")


def test_commands_it_cannot_express_are_left_to_argparse():
    # `ncdoc rule CODE` takes one positional (no nargs) and `ncdoc env` has subcommands: the recorder gives
    # up on the whole command
    assert fast_args.parse("rule", ["NC4004"]) is None
    assert fast_args.parse("env", ["generate", "--example", "dgx-h100"]) is None


# What `ncdoc check` must not import: its budget is about twice an empty Python's start-up,
# and each of these costs a large share of it (re alone: half an empty start-up).
LEAN_ABSENT = ("argparse", "re", "json", "json.decoder", "typing", "dataclasses", "enum", "functools",
               "collections", "importlib", "inspect", "pathlib", "shutil")


@pytest.mark.parametrize("example,expect_rc", [("dgx-h100", 0), ("dgx-h100-port-down", 1)])
def test_check_starts_without_argparse_re_or_the_json_decoder(tmp_path, example, expect_rc):
    from ncdoc.examples.machines import load_example
    snap = tmp_path / "node.json"
    snap.write_text(load_example(example).to_json())
    # modules the interpreter loaded before ncdoc (site, .pth files) do not count
    code = ("import sys; base = set(sys.modules); from ncdoc.cli.main import main; "
            "rc = main(['check', '--snapshot', %r, '--no-config']); "
            "bad = [m for m in %r if m in sys.modules and m not in base]; print('LOADED', bad); "
            "sys.exit(0 if not bad and rc == %d else 3)" % (str(snap), LEAN_ABSENT, expect_rc))
    p = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60, cwd=tmp_path)
    assert p.returncode == 0, p.stdout[-500:] + p.stderr[-1500:]


def test_check_exit_keeps_output_exit_status_and_atexit(tmp_path):
    # `ncdoc check` skips the interpreter's teardown (ncdoc.cli.main._exit_now): its output,
    # exit status and atexit handlers must be exactly those of a normal exit.
    from ncdoc.examples.machines import load_example
    snap = tmp_path / "node.json"
    snap.write_text(load_example("dgx-h100-port-down").to_json())
    code = ("import atexit, sys; atexit.register(lambda: print('ATEXIT', file=sys.stderr)); "
            "sys.argv = ['ncdoc', 'check', '--snapshot', %r, '--no-config']; "
            "from ncdoc.cli.main import entry; entry()" % str(snap))
    env = {k: v for k, v in __import__("os").environ.items() if k != "PYTHONUNBUFFERED"}   # buffered output too
    p = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60, env=env)
    q = subprocess.run([sys.executable, "-m", "ncdoc", "check", "--snapshot", str(snap), "--no-config", "--json"],
                       capture_output=True, text=True, timeout=60, env=env)
    rc, out, err = p.returncode, p.stdout, p.stderr
    assert rc == 1 and "NC4004 port-down" in out and out.endswith("\n"), (rc, out, err)
    assert err.rstrip().endswith("ATEXIT") and "problems (failing)" in err
    assert q.returncode == 1 and q.stdout.rstrip().endswith("}")
    bad = subprocess.run([sys.executable, "-m", "ncdoc", "check", "--snapshot", str(tmp_path / "missing.json")],
                         capture_output=True, text=True, timeout=60)
    assert bad.returncode == 2 and "no such file" in bad.stderr
