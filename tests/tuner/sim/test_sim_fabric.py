"""Layer (b): the properties a tuner relies on, knob by knob (the calibration to public paired
measurements is test_sim_anchors.py).

Sources for the figures are named in ncdoc/tuner/sim/fabric.py next to each term.
"""

import statistics
from dataclasses import replace

import pytest

from ncdoc.tuner.sim import SimTrialError, preset, simulate
from ncdoc.tuner.sim.fabric import NIC_EFF, channels_per_nic_eff

BIG = 8 << 30


def busbw(name_or_cluster, env=None, size=BIG, coll="all_reduce", reps=16):
    c = preset(name_or_cluster) if isinstance(name_or_cluster, str) else name_or_cluster
    return statistics.mean(simulate(c, env or {}, coll, [size], repeat_index=i)[0].busbw for i in range(reps))


def ratio(name, env_b, env_a=None, **kw):
    return busbw(name, env_b, **kw) / busbw(name, env_a or {}, **kw)


# ---------------------------------------------------------------- calibration the rest builds on

def test_two_node_h100_ring_matches_aggregate_nic_rate():
    assert 370 <= busbw("h100-ib-2node", {"NCCL_ALGO": "Ring"}) <= 392


def test_two_node_h100_default_tree_exceeds_the_network_rate():
    r = simulate(preset("h100-ib-2node"), {}, "all_reduce", [BIG])[0]
    assert r.algo == "NVLSTree"
    assert 450 <= busbw("h100-ib-2node") <= 490      # ~470, and above 8 NICs x 48 GB/s


def test_single_node_a100_ring():
    a100 = replace(preset("a100-ib-4node"), nodes=1)
    assert busbw(a100) == pytest.approx(235, rel=0.03)


def test_per_nic_rates():
    assert 46 <= 50 * NIC_EFF["IB"] * channels_per_nic_eff(2) <= 49            # NDR 400G
    assert 25 * NIC_EFF["IB"] * channels_per_nic_eff(2) == pytest.approx(23.7, abs=0.8)   # HDR 200G
    assert channels_per_nic_eff(1) < 0.6 < channels_per_nic_eff(2) < channels_per_nic_eff(3)


# ---------------------------------------------------------------- scale: healthy fabrics stay flat

def test_healthy_fabrics_stay_flat_with_scale_and_congestion_is_a_named_stress_preset():
    big = {n: busbw(preset("h100-ib-2node").with_fabric(nodes=n), size=4 << 30, reps=4) for n in (4, 8, 32)}
    assert all(350 <= bw <= 395 for bw in big.values()), big
    assert busbw("h100-ib-16node", size=4 << 30, reps=4) > 350
    assert busbw("h100-ib-16node-congested", size=4 << 30, reps=4) < 0.9 * busbw("h100-ib-16node", size=4 << 30,
                                                                                  reps=4)
    assert all(preset(n).congestion == 0 for n in ("h100-ib-8node", "h100-ib-16node", "h100-roce-8node"))


# ---------------------------------------------------------------- RoCE: ECMP, QPs and what they cost

def test_two_roce_nodes_on_one_rail_group_have_nothing_for_qps_to_fix():
    # nccl#2409 is a misconfigured host, not ECMP: within one leaf more QPs change nothing.
    assert busbw("h100-roce-2node") > 0.97 * busbw("h100-ib-2node")
    assert ratio("h100-roce-2node", {"NCCL_IB_QPS_PER_CONNECTION": "8"}) == pytest.approx(1.0, abs=0.03)


def test_roce_across_the_spine_qps_recover_to_a_plateau_and_more_are_not_free():
    base = busbw("h100-roce-8node")
    q = {n: busbw("h100-roce-8node", {"NCCL_IB_QPS_PER_CONNECTION": str(n), "NCCL_IB_SPLIT_DATA_ON_QPS": "1"})
         for n in (2, 4, 8, 16)}
    assert 1.15 <= q[4] / base <= 1.35                    # 0.71 -> 0.88 of the line rate
    assert q[2] < q[4]
    assert q[8] <= q[4] * 1.01 and q[16] < q[4]           # 4 -> 8: no gain; 16: a small cost
    small = 64 << 10
    assert busbw("h100-roce-8node", {"NCCL_IB_QPS_PER_CONNECTION": "16", "NCCL_IB_SPLIT_DATA_ON_QPS": "1"},
                 size=small) < 0.97 * busbw("h100-roce-8node", {"NCCL_IB_QPS_PER_CONNECTION": "4",
                                                                "NCCL_IB_SPLIT_DATA_ON_QPS": "1"}, size=small)


def test_adaptive_routing_needs_switch_support_and_the_variable():
    ar = {"NCCL_IB_ADAPTIVE_ROUTING": "1"}
    assert ratio("h100-roce-8node", ar) == pytest.approx(1.0, abs=0.03)      # switches without AR
    assert ratio("h100-roce-8node-ar", ar) > 1.3
    assert busbw("h100-roce-8node-ar", ar) > busbw("h100-roce-8node-ar", {"NCCL_IB_QPS_PER_CONNECTION": "4"})


def test_traffic_outside_the_lossless_class_collapses():
    assert ratio("h100-roce-8node-lossless-tc", {"NCCL_IB_TC": "106"}) > 2.5
    assert ratio("h100-roce-8node-lossless-tc", {"NCCL_IB_TC": "160"}) == pytest.approx(1.0, abs=0.05)
    assert ratio("h100-roce-8node", {"NCCL_IB_TC": "106"}) == pytest.approx(1.0, abs=0.03)   # all lossless


# ---------------------------------------------------------------- what experts tune on IB and NVLink

def test_channels_per_net_peer_matter_for_sendrecv_from_8_nodes_on_2_20():
    sr = dict(coll="sendrecv", size=1 << 30)
    assert ratio("h100-ib-8node", {"NCCL_NCHANNELS_PER_NET_PEER": "4"}, **sr) > 1.2
    assert ratio("h100-ib-2node", {"NCCL_NCHANNELS_PER_NET_PEER": "4"}, **sr) == pytest.approx(1.0, abs=0.03)
    # 2.19 used 2 per peer everywhere; 2.20's auto value halves to 1 on one 200G NIC per GPU (nccl#1272)
    gh = replace(preset("h100-ib-8node"), gpus_per_node=4, nics_per_node=4, nic_rate_gbps=200.0, nvls=False,
                 nvswitch=False)
    assert busbw(replace(gh, nccl_version="2.19.4"), **sr) > 1.2 * busbw(replace(gh, nccl_version="2.20.5"), **sr)


def test_pxn_aggregates_alltoall_on_rail_optimised_fabrics():
    off = {"NCCL_P2P_PXN_LEVEL": "0"}
    small, large = dict(coll="alltoall", size=2 << 20), dict(coll="alltoall", size=1 << 30)
    assert busbw("h100-ib-8node", **small) > 1.08 * busbw("h100-ib-8node", off, **small)
    assert busbw("h100-ib-8node", **large) < 1.03 * busbw("h100-ib-8node", off, **large)   # fades with size
    assert busbw("h100-ib-8node", {"NCCL_PXN_DISABLE": "1"}, **small) == pytest.approx(
        busbw("h100-ib-8node", off, **small), rel=0.02)


def test_cross_nic_zero_loses_the_alternating_rings():
    assert ratio("h100-ib-2node", {"NCCL_ALGO": "Ring", "NCCL_CROSS_NIC": "0"}, {"NCCL_ALGO": "Ring"}) == \
        pytest.approx(370 / 390, abs=0.02)


def test_relaxed_ordering_matters_in_vms_only():
    ring, ro = {"NCCL_ALGO": "Ring"}, {"NCCL_ALGO": "Ring", "NCCL_IB_PCI_RELAXED_ORDERING": "1"}
    assert ratio("h100-vm-2node", ro, ring) > 1.6
    assert ratio("h100-ib-2node", ro, ring) == pytest.approx(1.0, abs=0.03)
    with pytest.raises(SimTrialError, match="relaxed ordering is not available"):
        simulate(replace(preset("h100-vm-2node"), relaxed_ordering="none"), {"NCCL_IB_PCI_RELAXED_ORDERING": "1"},
                 "all_reduce", [1 << 20])


@pytest.mark.parametrize("name", ["h100-ib-2node", "h100-1node"])
def test_default_is_near_optimal_on_clean_fabrics(name):
    candidates = [{"NCCL_ALGO": "Ring"}, {"NCCL_ALGO": "Tree"}, {"NCCL_PROTO": "Simple"}, {"NCCL_MAX_CTAS": "8"},
                  {"NCCL_BUFFSIZE": str(8 << 20)}, {"NCCL_IB_QPS_PER_CONNECTION": "4"},
                  {"NCCL_NCHANNELS_PER_NET_PEER": "4"}, {"NCCL_P2P_NET_CHUNKSIZE": "524288"}]
    for size in (1 << 20, 64 << 20, 1 << 30):
        base = busbw(name, size=size, reps=8)
        best = base
        for env in candidates:
            try:
                best = max(best, busbw(name, env, size=size, reps=8))
            except SimTrialError:
                pass
        assert best / base < 1.05, size


@pytest.mark.parametrize("name,env,worse_than", [
    ("h100-ib-2node", {"NCCL_PROTO": "LL"}, 0.2),
    ("h100-ib-2node", {"NCCL_ALGO": "Ring", "NCCL_MAX_CTAS": "1"}, 0.2),
    ("h100-ib-2node", {"NCCL_NET_GDR_LEVEL": "LOC"}, 0.55),
    ("h100-ib-2node", {"NCCL_IB_DISABLE": "1"}, 0.05),
    ("h100-ib-2node", {"NCCL_BUFFSIZE": "65536"}, 0.9),
    ("h100-1node", {"NCCL_NVLS_ENABLE": "0"}, 0.8),
    ("h100-1node", {"NCCL_P2P_DISABLE": "1", "NCCL_NVLS_ENABLE": "0"}, 0.2),
    ("a100-ib-4node", {"NCCL_NTHREADS": "64"}, 0.8),
])
def test_bad_settings_hurt(name, env, worse_than):
    assert busbw(name, env, reps=6) < worse_than * busbw(name, {}, reps=6)


def test_gdr_off_and_nic_over_sys():
    assert busbw("h100-nogdr-2node") < 0.55 * busbw("h100-ib-2node")
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
    ("h100-socket-2node", {"NCCL_PROTO": "LL128"}, "call"),           # wrong results, NVIDIA/nccl#831
])
def test_invalid_settings_raise(name, env, kind):
    with pytest.raises(SimTrialError) as e:
        simulate(preset(name), env, "all_gather", [1 << 20])
    assert e.value.kind == kind and e.value.message


def test_ll128_forced_where_nccl_keeps_it_off_reports_wrong_results():
    with pytest.raises(SimTrialError, match=r"wrong results \(#wrong > 0\)"):
        simulate(preset("h100-socket-2node"), {"NCCL_PROTO": "LL128"}, "all_reduce", [8 << 20])
    assert simulate(preset("h100-ib-2node"), {"NCCL_PROTO": "LL128"}, "all_reduce", [8 << 20])[0].proto == "LL128"


def test_nvls_forced_on_broken_multicast_fails_init_but_is_ignored_without_nvswitch():
    broken = replace(preset("h100-1node"), nvls=False)
    assert simulate(broken, {}, "all_reduce", [1 << 30])[0].algo != "NVLS"
    with pytest.raises(SimTrialError, match="Failed to bind NVLink SHARP"):
        simulate(broken, {"NCCL_NVLS_ENABLE": "1"}, "all_reduce", [1 << 30])
    assert simulate(preset("l40s-pcie-2node"), {"NCCL_NVLS_ENABLE": "1"}, "all_reduce", [1 << 30])


# ---------------------------------------------------------------- determinism

def test_deterministic_per_seed_and_noisy_across_repeats():
    c, env, sizes = preset("h100-roce-8node"), {"NCCL_ALGO": "Ring"}, [1 << 20, 1 << 28]
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
    assert busbw("h100-ib-2node", {"NCCL_ALGO": "Ring", "NCCL_MAX_CTAS": "8"}) < 0.6 * ring     # 1 per NIC
    assert busbw("h100-ib-2node", {"NCCL_ALGO": "Ring", "NCCL_MIN_CTAS": "64"}) < 0.95 * ring   # 8 per NIC
