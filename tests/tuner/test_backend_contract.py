"""The backend contract, the same behavioural assertions for every backend (as Optuna's sampler
contract tests hold every sampler to one set): sim, nccl-tests (through the stand-in binaries in
tests/fixtures/bin) and torch (on a machine without torch and CUDA: its clear "not available" path).

What the study relies on: a backend says what it is and what it runs on; measures every requested
size of every collective; turns a setting NCCL rejects into a TrialFailed with NCCL's reason, never
a number or a bare exception; travels to a Ray worker and measures the same there; loads a tuner
table when it can and says why not when it cannot; and, where it cannot run at all, creating it is
a usage error (exit 2) that says why.
"""

import math
import pickle
import shutil

import pytest

from ncdoc.errors import UsageError
from ncdoc.tuner.backends import BACKENDS, Backend, Measurement, TrialFailed
from ncdoc.tuner.space import FABRICS, Hardware
from ncdoc.tuner.table import MAX_BYTES, Rule
from paths import TESTS

BIN = TESTS / "fixtures" / "bin"
HW1 = Hardware(fabric="ib", nodes=1, gpus_per_node=8, nics_per_node=8, nvswitch=True, nvls=True, sm=90,
               nccl_version="2.30.7")
WORKLOAD = (("all_reduce", (1 << 20, 1 << 26)), ("all_gather", (1 << 22, 1 << 24)))
FAILURE_KINDS = ("init", "call", "crash", "hang", "timeout", "tool")
# Ring/Simple on 8 channels for every all-reduce: NCCL's default on one H100 node is NVLS, so a
# backend that loaded the table measures something else than one that did not.
TABLE = (Rule("all_reduce", 0, MAX_BYTES, "Ring", "Simple", 8, -1, -1),)


def _torch_reason():
    from ncdoc.tuner.backends.torch import available
    return available()


def make(name, tmp_path, *, plugin=True):
    """A ready backend of each kind, or pytest.skip with the reason it cannot run here."""
    if name == "sim":
        from ncdoc.tuner.backends.sim import SimBackend, sim_cluster
        return SimBackend(sim_cluster(preset="h100-1node"), base_env={"NCCL_DEBUG": "WARN"})
    if name == "nccl-tests":
        if shutil.which("python3") is None:
            pytest.skip("the nccl-tests stand-ins run on python3")
        from ncdoc.tuner.backends.nccl_tests import NcclTestsBackend
        lib = tmp_path / "libnccl-tuner-example.so"        # the stand-ins load rules when this file exists
        lib.write_bytes(b"")
        return NcclTestsBackend(str(BIN), hardware=HW1, base_env={"NCCL_DEBUG": "WARN"}, iters=2, warmup=1,
                                collectives=[c for c, _ in WORKLOAD], tuner_plugin=str(lib) if plugin else None,
                                table_dir=str(tmp_path), log_dir=str(tmp_path / "trials"))
    why = _torch_reason()
    if why:
        pytest.skip(f"backend torch cannot measure here: {why} (its usage error is checked below)")
    from ncdoc.tuner.backends.torch import TorchBackend
    import torch
    if torch.cuda.device_count() < 2:
        pytest.skip("backend torch needs two GPUs for a collective to move anything")
    return TorchBackend(hardware=Hardware(fabric="ib", nodes=1, gpus_per_node=torch.cuda.device_count()), iters=2,
                        warmup=1, tuner_plugin=None, log_dir=str(tmp_path / "trials"))


@pytest.fixture(params=BACKENDS)
def backend(request, tmp_path):
    return make(request.param, tmp_path)


def test_says_what_it_is_and_what_it_runs_on(backend):
    assert backend.name in BACKENDS and backend.describe()["backend"] == backend.name
    hw = backend.hardware()
    assert isinstance(hw, Hardware) and hw.fabric in FABRICS and hw.nodes >= 1 and hw.gpus_per_node >= 1
    assert all(k.startswith("NCCL_") for k in backend.baseline_env())
    assert backend.simulated == (backend.name == "sim")
    assert not (backend.needs_fresh_process and backend.in_process_ok)   # a fresh process is a worker


def test_measures_every_requested_size_of_every_collective(backend):
    m = backend.measure(backend.baseline_env(), WORKLOAD, 0, timeout_s=120)
    assert isinstance(m, Measurement)
    assert [c for c, _ in m.rows] == [c for c, _ in WORKLOAD]
    for collective, sizes in WORKLOAD:
        rows = m.results(collective)
        assert [r.size for r in rows] == list(sizes)
        assert all(r.busbw > 0 and math.isfinite(r.busbw) for r in rows)
        assert rows[-1].busbw > rows[0].busbw                 # bigger messages move faster


def test_a_setting_nccl_rejects_is_a_failed_trial_with_nccls_reason(backend):
    with pytest.raises(TrialFailed) as err:
        backend.measure({"NCCL_ALGO": "Bogus"}, WORKLOAD, 0, timeout_s=120)
    assert err.value.kind in FAILURE_KINDS and "Bogus" in err.value.reason
    again = pickle.loads(pickle.dumps(err.value))             # failures cross process boundaries intact
    assert (again.kind, again.reason) == (err.value.kind, err.value.reason)


def test_travels_to_a_worker_and_measures_the_same_there(backend):
    if not backend.simulated and backend.name != "nccl-tests":
        pytest.skip("real hardware does not repeat itself to the last digit")
    copy = pickle.loads(pickle.dumps(backend))
    assert copy.measure({}, WORKLOAD, 3, timeout_s=120).busbw() == backend.measure({}, WORKLOAD, 3,
                                                                                    timeout_s=120).busbw()


def test_loads_a_tuner_table_when_it_can(backend):
    if backend.name == "torch":
        pytest.skip("no example tuner plugin is built here")
    assert backend.table_support() is None
    plain = backend.measure({}, WORKLOAD, 0, timeout_s=120).busbw()
    tabled = backend.measure({}, WORKLOAD, 0, timeout_s=120, table=TABLE).busbw()
    assert tabled["all_reduce"] != plain["all_reduce"]        # the rules changed what NCCL ran
    # No rule for all_gather: the example plugin leaves it ONE channel (the hazard tables must cover).
    assert all(tabled["all_gather"][s] < 0.5 * plain["all_gather"][s] for s in plain["all_gather"])


@pytest.mark.parametrize("name", [b for b in BACKENDS if b != "sim"])
def test_says_why_it_cannot_load_a_table(name, tmp_path):
    be = make(name, tmp_path, plugin=False)
    why = be.table_support()
    assert why and "--tuner-plugin" in why
    with pytest.raises(TrialFailed) as err:
        be.measure({}, WORKLOAD, 0, timeout_s=120, table=TABLE)
    assert err.value.kind == "tool" and "--tuner-plugin" in err.value.reason


@pytest.mark.parametrize("name", BACKENDS)
def test_where_it_cannot_run_creating_it_is_a_usage_error_that_says_why(name, tmp_path):
    from ncdoc.tuner.run import TuneOptions, create_backend

    if name == "sim":                       # the simulator runs anywhere
        assert isinstance(create_backend(TuneOptions(backend="sim", preset="h100-1node"), print), Backend)
        return
    if name == "nccl-tests":
        with pytest.raises(UsageError, match=r"all_reduce_perf not found .*--nccl-tests-dir"):
            create_backend(TuneOptions(backend="nccl-tests", example="dgx-h100", nodes=1,
                                       nccl_tests_dir=str(tmp_path)), print)
        return
    why = _torch_reason()
    if not why:
        pytest.skip("torch with CUDA is present: the backend can run")
    with pytest.raises(UsageError, match="backend torch is not available: ") as err:
        create_backend(TuneOptions(backend="torch", example="dgx-h100", nodes=1), print)
    assert why in str(err.value)
