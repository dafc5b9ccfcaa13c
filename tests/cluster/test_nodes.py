"""Node lists: Slurm hostlists both ways, MPI hostfiles in both forms, and the lists ncdoc refuses."""

import pytest

from ncdoc.cluster.nodes import compress, expand, read_hostfile, unique, within
from ncdoc.errors import InputError, UsageError


@pytest.mark.parametrize("expr, names", [
    ("gpu[01-03,07],login1", ["gpu01", "gpu02", "gpu03", "gpu07", "login1"]),
    ("rack[1-2]-n[08-09]", ["rack1-n08", "rack1-n09", "rack2-n08", "rack2-n09"]),
    ("node9,node10", ["node9", "node10"]),
    ("a[8-11]", ["a8", "a9", "a10", "a11"]),
])
def test_hostlists_expand_as_slurm_does(expr, names):
    assert expand(expr) == names


def test_compress_undoes_expand_keeping_zero_padding():
    names = [f"gpu{i:03d}" for i in range(1, 65)] + ["gpu100", "login"]
    expr = compress(names)
    assert expr == "gpu[001-064,100],login"
    assert compress([f"gpu{i:02d}" for i in range(1, 17)]) == "gpu[01-16]"
    assert expand(expr) == names
    assert compress(["node9", "node10", "node11", "node13"]) == "node[9-11,13]"


@pytest.mark.parametrize("expr, words", [("gpu[01-", "without"), ("gpu[05-01]", "backwards"),
                                         ("gpu[a-b]", "not a number"), ("bad name", "not a host name")])
def test_bad_hostlists_say_what_is_wrong(expr, words):
    with pytest.raises(UsageError, match=words):
        expand(expr)


def test_empty_and_duplicate_lists_are_refused():
    with pytest.raises(UsageError, match="empty"):
        unique([])
    with pytest.raises(UsageError, match="node02 twice"):
        unique(["node01", "node02", "node02"])


def test_hostfiles_in_open_mpi_and_mpich_form(tmp_path):
    f = tmp_path / "hosts"
    f.write_text("# the rack\ngpu01 slots=8\ngpu02 slots=8 max_slots=8\n\ngpu03:4\ngpu04\n")
    assert read_hostfile(str(f)) == [("gpu01", 8), ("gpu02", 8), ("gpu03", 4), ("gpu04", None)]


@pytest.mark.parametrize("text, words", [("gpu01 slots=x\n", "slots must be a number"),
                                         ("gpu01 cpus=4\n", "not an Open MPI"), ("gpu01\ngpu01\n", "listed twice"),
                                         ("# nothing\n", "names no hosts")])
def test_bad_hostfiles_name_file_line_and_problem(tmp_path, text, words):
    f = tmp_path / "hosts"
    f.write_text(text)
    with pytest.raises(InputError, match=words) as exc:
        read_hostfile(str(f))
    assert str(f) in str(exc.value)


def test_hosts_outside_the_allocation_are_named():
    with pytest.raises(UsageError, match="not in the allocation: gpu09, gpu10"):
        within(["gpu01", "gpu09", "gpu10"], expand("gpu[01-08]"), what="the hostfile", where="the allocation")
