"""Layer (b): calibration against anchors.md, and the properties a tuner relies on.

Figures (anchors.md, /work/shared/reference): NDR 400G 46-48 GB/s per NIC and 8x H100 NVLS
~476 GB/s (nccl-tests #290); 2x8 H100 ring 370-385 GB/s (derived from #290); 2x8 H100 default
Tree/NVLSTree ~470 GB/s (nccl#2409 citing nccl-tests #309); RoCE misbehaving 216-231 GB/s
(nccl#2409); socket fallback ~5 GB/s (AReaL #639); 8x A100 NVLink 235 GB/s (SuperBench).
"""

import statistics
import time
from dataclasses import replace

import pytest

from ncdoc.tuner.sim import PRESETS, SimTrialError, preset, simulate
from ncdoc.tuner.sim.fabric import expected_ecmp_efficiency

BIG = 8 << 30


def busbw(name_or_cluster, env=None, size=BIG, coll="all_reduce", reps=24):
    c = preset(name_or_cluster) if isinstance(name_or_cluster, str) else name_or_cluster
    return statistics.mean(simulate(c, env or {}, coll, [size], repeat_index=i)[0].busbw for i in range(reps))


# ---------------------------------------------------------------- calibration

def test_two_node_h100_ring_matches_aggregate_nic_rate():
    assert 370 <= busbw("h100-ib-2node", {"NCCL_ALGO": "Ring"}) <= 385


def test_two_node_h100_default_tree_exceeds_the_network_rate():
    r = simulate(preset("h100-ib-2node"), {}, "all_reduce", [BIG])[0]
    assert r.algo == "NVLSTree"
    assert 450 <= busbw("h100-ib-2node") <= 490      # ~470, and above 8 NICs x 47 GB/s


def test_single_node_h100_nvls():
    assert busbw("h100-1node") == pytest.approx(476, rel=0.05)
    assert 350 <= busbw("h100-1node", {"NCCL_ALGO": "Ring"}) <= 370


def test_single_node_a100_ring():
    a100 = replace(preset("a100-ib-4node"), nodes=1)
    assert busbw(a100) == pytest.approx(235, rel=0.03)


def test_socket_fallback():
    assert 4.0 <= busbw("h100-socket-2node", size=1 << 30) <= 7.0
    # Same cluster with RDMA disabled by the environment falls back the same way.
    assert 4.0 <= busbw("h100-ib-2node", {"NCCL_IB_DISABLE": "1"}, size=1 << 30) <= 7.0


def test_per_nic_rates():
    from ncdoc.tuner.sim.fabric import NIC_EFF
    assert 46 <= 50 * NIC_EFF["IB"] <= 48              # NDR 400G
    assert 23.7 == pytest.approx(25 * NIC_EFF["IB"], abs=0.3)   # HDR 200G


def test_roce_ecmp_collisions_and_the_qp_remedy():
    ib, roce = busbw("h100-ib-2node", reps=48), busbw("h100-roce-2node", reps=48)
    assert roce < 0.65 * ib
    assert 200 <= roce <= 260                           # nccl#2409: 216-231 GB/s
    fixed = busbw("h100-roce-2node", {"NCCL_IB_QPS_PER_CONNECTION": "4", "NCCL_IB_SPLIT_DATA_ON_QPS": "1"}, reps=48)
    assert 1.15 <= fixed / roce <= 1.5
    assert busbw("h100-roce-2node", {"NCCL_IB_QPS_PER_CONNECTION": "4"}, reps=48) > roce
    assert expected_ecmp_efficiency(64, 8) > expected_ecmp_efficiency(16, 8)


# ---------------------------------------------------------------- what a tuner finds

_CANDIDATES = [
    {"NCCL_ALGO": "Ring"}, {"NCCL_ALGO": "Tree"}, {"NCCL_PROTO": "Simple"}, {"NCCL_PROTO": "LL,LL128"},
    {"NCCL_MAX_NCHANNELS": "8"}, {"NCCL_MIN_NCHANNELS": "32"}, {"NCCL_BUFFSIZE": str(8 << 20)},
    {"NCCL_IB_QPS_PER_CONNECTION": "4", "NCCL_IB_SPLIT_DATA_ON_QPS": "1"}, {"NCCL_NVLS_NCHANNELS": "32"},
    {"NCCL_ALGO": "Tree", "NCCL_MAX_NCHANNELS": "8"}, {"NCCL_P2P_NET_CHUNKSIZE": "524288"},
]


def _best_gain(name, size, reps=12):
    base = busbw(name, {}, size=size, reps=reps)
    best = base
    for env in _CANDIDATES:
        try:
            best = max(best, busbw(name, env, size=size, reps=reps))
        except SimTrialError:
            pass
    return best / base


@pytest.mark.parametrize("name", ["h100-ib-2node", "h100-1node"])
def test_default_is_near_optimal_on_clean_fabrics(name):
    for size in (1 << 20, 64 << 20, 1 << 30):
        assert _best_gain(name, size) < 1.05, size


def test_gains_at_scale_come_from_the_fabric():
    # 16 nodes: congestion punishes rings' 2(N-1) network steps and extra channels per NIC.
    assert _best_gain("h100-ib-16node", 32 << 20) > 1.10
    ring = busbw("h100-ib-16node", {"NCCL_ALGO": "Ring"})
    assert busbw("h100-ib-16node", {"NCCL_ALGO": "Ring", "NCCL_MAX_NCHANNELS": "8"}) > 1.03 * ring


@pytest.mark.parametrize("name,env,worse_than", [
    ("h100-ib-2node", {"NCCL_PROTO": "LL"}, 0.2),
    ("h100-ib-2node", {"NCCL_ALGO": "Ring", "NCCL_MAX_NCHANNELS": "1"}, 0.2),
    ("h100-ib-2node", {"NCCL_MAX_CTAS": "1"}, 0.2),
    ("h100-ib-2node", {"NCCL_NET_GDR_LEVEL": "LOC"}, 0.5),
    ("h100-ib-2node", {"NCCL_IB_DISABLE": "1"}, 0.05),
    ("h100-ib-2node", {"NCCL_BUFFSIZE": "65536"}, 0.9),
    ("h100-1node", {"NCCL_NVLS_ENABLE": "0"}, 0.8),
    ("h100-1node", {"NCCL_P2P_DISABLE": "1", "NCCL_NVLS_ENABLE": "0"}, 0.2),
    ("a100-ib-4node", {"NCCL_NTHREADS": "64"}, 0.8),
])
def test_bad_settings_hurt(name, env, worse_than):
    assert busbw(name, env, reps=6) < worse_than * busbw(name, {}, reps=6)


def test_gdr_off_and_nic_over_sys():
    assert busbw("h100-nogdr-2node") < 0.5 * busbw("h100-ib-2node")
    # PCIe-only node, one 200G NIC: a GPU on the other socket loses GPUDirect RDMA and shares QPI/xGMI.
    near = replace(preset("l40s-pcie-2node"), gpus_per_node=4, gpu_gpu_path="PXB", nics_per_node=1,
                   gpu_nic_paths=("PXB",) * 4)
    far = replace(near, gpu_nic_paths=("SYS",) * 4)
    assert busbw(far) < 0.8 * busbw(near)
    # With NVLink, PXN reaches a NIC through the peer GPU instead; disabling PXN brings SYS back.
    half = replace(preset("h100-ib-2node"), gpu_nic_paths=("PIX",) * 4 + ("SYS",) * 4)
    assert busbw(half) > 0.95 * busbw("h100-ib-2node")
    assert busbw(half, {"NCCL_PXN_DISABLE": "1"}) < 0.6 * busbw(half)


def test_socket_helper_threads_help():
    base = busbw("h100-socket-2node", size=1 << 30)
    assert busbw("h100-socket-2node", {"NCCL_SOCKET_NTHREADS": "4", "NCCL_NSOCKS_PERTHREAD": "4"},
                 size=1 << 30) > 3 * base


# ---------------------------------------------------------------- failures

@pytest.mark.parametrize("name,env,kind", [
    ("h100-ib-2node", {"NCCL_ALGO": "Tree"}, "call"),                 # all_gather has no Tree
    ("h100-ib-2node", {"NCCL_ALGO": "Bogus"}, "init"),
    ("h100-ib-2node", {"NCCL_IB_QPS_PER_CONNECTION": "200"}, "crash"),
    ("h100-ib-2node", {"NCCL_BUFFSIZE": "garbage"}, "hang"),
    ("h100-socket-2node", {"NCCL_NET": "IB"}, "init"),
])
def test_invalid_settings_raise(name, env, kind):
    with pytest.raises(SimTrialError) as e:
        simulate(preset(name), env, "all_gather", [1 << 20])
    assert e.value.kind == kind and e.value.message


def test_nvls_forced_on_broken_multicast_fails_init_but_is_ignored_without_nvswitch():
    broken = replace(preset("h100-1node"), nvls=False)
    assert simulate(broken, {}, "all_reduce", [1 << 30])[0].algo != "NVLS"
    with pytest.raises(SimTrialError, match="Failed to bind NVLink SHARP"):
        simulate(broken, {"NCCL_NVLS_ENABLE": "1"}, "all_reduce", [1 << 30])
    assert simulate(preset("l40s-pcie-2node"), {"NCCL_NVLS_ENABLE": "1"}, "all_reduce", [1 << 30])


# ---------------------------------------------------------------- determinism and speed

def test_deterministic_per_seed_and_noisy_across_repeats():
    c, env, sizes = preset("h100-roce-2node"), {"NCCL_ALGO": "Ring"}, [1 << 20, 1 << 28]
    a = simulate(c, env, "all_reduce", sizes, seed=3, repeat_index=1)
    assert a == simulate(c, env, "all_reduce", sizes, seed=3, repeat_index=1)
    assert a[1] == simulate(c, env, "all_reduce", [1 << 28], seed=3, repeat_index=1)[0]   # per size
    assert a != simulate(c, env, "all_reduce", sizes, seed=3, repeat_index=2)
    assert a != simulate(c, env, "all_reduce", sizes, seed=4, repeat_index=1)
    assert a != simulate(replace(c, seed=9), env, "all_reduce", sizes, seed=3, repeat_index=1)
    quiet = replace(preset("h100-ib-2node"), noise_sigma=0.0)
    times = {simulate(quiet, {}, "all_reduce", [1 << 28], repeat_index=i)[0].time_us for i in range(5)}
    assert len(times) == 1


def test_noise_sigma_is_about_what_was_asked():
    c = replace(preset("h100-ib-2node"), noise_sigma=0.02)
    t = [simulate(c, {}, "all_reduce", [1 << 28], repeat_index=i)[0].time_us for i in range(400)]
    assert 0.015 < statistics.pstdev(t) / statistics.mean(t) < 0.025


@pytest.mark.parametrize("name", PRESETS)
def test_twenty_sizes_take_well_under_ten_ms(name):
    c, sizes = preset(name), [1 << k for k in range(3, 33, 3)] * 2
    simulate(c, {"NCCL_MIN_NCHANNELS": "4"}, "all_reduce", sizes)       # warm the caches
    start = time.perf_counter()
    for i in range(20):
        simulate(c, {"NCCL_MIN_NCHANNELS": "4"}, "all_reduce", sizes, repeat_index=i)
    assert (time.perf_counter() - start) / 20 < 0.005
    start = time.perf_counter()
    simulate(c, {"NCCL_BUFFSIZE": str(3 << 20)}, "all_reduce", sizes)   # a new environment, cold
    assert time.perf_counter() - start < 0.010


def test_trial_errors_and_clusters_survive_pickling():
    import pickle
    err = pickle.loads(pickle.dumps(SimTrialError("NCCL hangs", kind="hang")))
    assert (type(err), err.kind, err.message) == (SimTrialError, "hang", "NCCL hangs")
    c = preset("h100-roce-2node")
    assert pickle.loads(pickle.dumps(c)) == c


def test_only_nccl_variables_change_the_result():
    c = preset("h100-ib-2node")
    assert simulate(c, {"HOME": "/root", "CUDA_VISIBLE_DEVICES": "0"}, "all_reduce", [1 << 26]) == \
        simulate(c, {}, "all_reduce", [1 << 26])


def test_nic_saturation_by_channel_count():
    ring = busbw("h100-ib-2node", {"NCCL_ALGO": "Ring"})
    assert busbw("h100-ib-2node", {"NCCL_ALGO": "Ring", "NCCL_MAX_NCHANNELS": "8"}) < 0.9 * ring   # 1 per NIC
    assert busbw("h100-ib-2node", {"NCCL_ALGO": "Ring", "NCCL_MIN_NCHANNELS": "64"}) < 0.95 * ring  # 8 per NIC
