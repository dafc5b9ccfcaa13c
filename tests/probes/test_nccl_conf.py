"""NCCL's config-file parsing and precedence, as src/misc/param.cc implements them (nccl_facts.md 1.2)."""

from pathlib import Path

from ncdoc.envfiles.layers import parse_conf as parse_conf_text
from ncdoc.probes.nccl_env import config_files, read_nccl_env


def _pairs(values):
    return [(v.name, v.value) for v in values]


def test_split_at_first_equals_without_trimming_or_unquoting():
    text = 'NCCL_DEBUG = INFO\nNCCL_IB_HCA="mlx5_0"\nNCCL_X=a=b\n'
    assert _pairs(parse_conf_text(text, "file:/etc/nccl.conf")) == [
        ("NCCL_DEBUG ", " INFO"), ("NCCL_IB_HCA", '"mlx5_0"'), ("NCCL_X", "a=b")]


def test_lines_without_equals_comments_and_empty_names_are_skipped():
    text = "# NCCL_DEBUG=INFO\nNCCL_DEBUG\n=value\n\n  # indented=comment-not\nNCCL_A=1"
    values = parse_conf_text(text, "x")
    # only a line *starting* with '#' is a comment; the indented one is an assignment
    assert _pairs(values) == [("  # indented", "comment-not"), ("NCCL_A", "1")]
    assert [v.line for v in values] == [5, 6]


def test_one_trailing_newline_then_one_carriage_return_are_dropped():
    values = parse_conf_text("NCCL_DEBUG=INFO\r\nNCCL_B=x\r\r\n", "x")
    assert _pairs(values) == [("NCCL_DEBUG", "INFO"), ("NCCL_B", "x\r")]


def test_overlong_lines_are_read_in_4095_character_pieces_and_fields_cut_at_1023():
    long_value = "v" * 5000
    values = parse_conf_text(f"NCCL_LONG={long_value}\n", "x")
    first = values[0]
    assert first.name == "NCCL_LONG" and len(first.value) == 1023
    # the rest of the physical line (no '=' in it) is another "line" NCCL skips
    assert len(values) == 1
    tail = "N" * 4095 + "NCCL_T=1"
    assert _pairs(parse_conf_text(tail, "x")) == [("NCCL_T", "1")]


def _tree(tmp_path: Path, files: dict[str, str]) -> str:
    for rel, text in files.items():
        p = tmp_path / rel.lstrip("/")
        p.parent.mkdir(parents=True, exist_ok=True)
        p.write_text(text)
    return str(tmp_path)


def test_precedence_env_over_user_file_over_etc(tmp_path):
    root = _tree(tmp_path, {
        "/etc/nccl.conf": "NCCL_DEBUG=WARN\nNCCL_IB_HCA=mlx5\nNCCL_SOCKET_IFNAME=eth0\n",
        "/home/u/.nccl.conf": "NCCL_DEBUG=INFO\nNCCL_IB_HCA=mlx5_0\n",
    })
    env = read_nccl_env({"NCCL_IB_HCA": "=mlx5_1", "PATH": "/bin"}, home="/home/u", root=root)
    assert env.as_dict() == {"NCCL_DEBUG": "INFO", "NCCL_IB_HCA": "=mlx5_1", "NCCL_SOCKET_IFNAME": "eth0"}
    src = {v.name: v.source for v in env.values}
    assert src == {"NCCL_DEBUG": "file:/home/u/.nccl.conf", "NCCL_IB_HCA": "env",
                   "NCCL_SOCKET_IFNAME": "file:/etc/nccl.conf"}
    assert [(v.name, v.value, v.source) for v in env.shadowed] == [
        ("NCCL_IB_HCA", "mlx5_0", "file:/home/u/.nccl.conf"),
        ("NCCL_DEBUG", "WARN", "file:/etc/nccl.conf"),
        ("NCCL_IB_HCA", "mlx5", "file:/etc/nccl.conf"),
    ]
    assert env.files == ("/home/u/.nccl.conf", "/etc/nccl.conf")
    assert env.status.state == "ok"


def test_first_line_wins_inside_one_file(tmp_path):
    root = _tree(tmp_path, {"/etc/nccl.conf": "NCCL_DEBUG=WARN\nNCCL_DEBUG=INFO\n"})
    env = read_nccl_env({}, home=None, root=root)
    assert env.get("NCCL_DEBUG") == "WARN"
    assert [(v.value, v.line) for v in env.shadowed] == [("INFO", 2)]


def test_nccl_conf_file_replaces_the_home_file_and_is_not_tilde_expanded(tmp_path):
    root = _tree(tmp_path, {"/home/u/.nccl.conf": "NCCL_A=home\n", "/opt/site.conf": "NCCL_A=site\n"})
    env = read_nccl_env({"NCCL_CONF_FILE": "/opt/site.conf"}, home="/home/u", root=root)
    assert env.get("NCCL_A") == "site" and env.files == ("/opt/site.conf",)
    # NCCL_CONF_FILE itself is an NCCL_ variable of the process environment
    assert env.get("NCCL_CONF_FILE") == "/opt/site.conf"
    env = read_nccl_env({"NCCL_CONF_FILE": "~/.nccl.conf"}, home="/home/u", root=root)
    assert env.get("NCCL_A") is None and env.files == ()
    assert config_files({"NCCL_CONF_FILE": "~/x"}, "/home/u") == ["~/x", "/etc/nccl.conf"]


def test_empty_nccl_conf_file_falls_back_to_home_and_home_defaults_to_HOME(tmp_path):
    root = _tree(tmp_path, {"/root/.nccl.conf": "NCCL_A=1\n"})
    env = read_nccl_env({"NCCL_CONF_FILE": "", "HOME": "/root"}, home=None, root=root)
    assert env.get("NCCL_A") == "1" and env.files == ("/root/.nccl.conf",)


def test_only_nccl_names_are_kept_from_files_and_env(tmp_path):
    root = _tree(tmp_path, {"/etc/nccl.conf": "CUDA_VISIBLE_DEVICES=0\nNCCL_DEBUG =INFO\n"})
    env = read_nccl_env({"OMP_NUM_THREADS": "4"}, home=None, root=root)
    assert env.as_dict() == {"NCCL_DEBUG ": "INFO"}    # the trailing space is kept: NCCL sees that name


def test_unreadable_file_is_reported_not_fatal(tmp_path):
    root = _tree(tmp_path, {})
    (tmp_path / "etc" / "nccl.conf").mkdir(parents=True)        # a folder where a file should be
    env = read_nccl_env({"NCCL_X": "1"}, home=None, root=root)
    assert env.status.state == "ok" and "directory" in env.status.reason
    assert env.as_dict() == {"NCCL_X": "1"} and env.files == ()
