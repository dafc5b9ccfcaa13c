"""The bundled examples `--example` reads are stored snapshots: each must equal a fresh capture of
its machine's tree by the real probes, so the fast path cannot drift from what the probes see.
After changing a spec, a probe or the model: python -m ncdoc.examples.regenerate --write."""

from __future__ import annotations

import pytest

from ncdoc.examples import regenerate, stored
from ncdoc.examples.machines import list_examples


@pytest.mark.parametrize("name", [n for n, _ in list_examples()])
def test_stored_snapshot_is_a_fresh_capture(name):
    with open(stored.path_of(name), encoding="utf-8") as fh:
        current = fh.read()
    assert current == regenerate.capture_text(name), \
        f"{stored.path_of(name)} is stale: run python -m ncdoc.examples.regenerate --write and review the diff"


def test_every_stored_snapshot_has_a_spec():
    assert set(stored.names()) == {n for n, _ in list_examples()}


def test_stored_form_leaves_out_what_changes_per_run():
    snap = stored.load_example("dgx-h100")
    assert snap.created == "" and snap.probes.timings == () and snap.origin == "example:dgx-h100"


def test_an_unknown_example_names_the_known_ones():
    from ncdoc.errors import UsageError
    with pytest.raises(UsageError) as err:
        stored.load_example("dgx-h900")
    assert "unknown example 'dgx-h900'" in str(err.value) and "dgx-h100" in str(err.value)
    for bad in ("../dgx-h100", ".hidden", ""):
        with pytest.raises(UsageError):
            stored.load_example(bad)
