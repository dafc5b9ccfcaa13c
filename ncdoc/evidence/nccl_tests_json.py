"""nccl-tests -J output (JSON_FILE_VERSION 3, src/util.cu): the same facts as the text reader.

Top level: version, start_time, args[], env[], nccl_version, config{...}, config.devices[...] (the writer
opens "devices" inside "config"; a top-level "devices" is read too),
results[{size, count, type, redop, root, out_of_place{time|cpu_time, alg_bw, bus_bw, nwrong},
in_place{...}, [out_of_place_per_iter{...}], actual_iterations, experiment_name}],
out_of_bounds{count, okay}, average_bus_bandwidth{bandwidth, okay}, errors[], end_time.
"""

from __future__ import annotations

from typing import Any

from ncdoc.readers.numbers import float_or_none
from ncdoc.startup.json_load import load_data
from ncdoc.evidence.citation import CitationBook
from ncdoc.evidence.nccl_tests_derive import collective_name, derive, nccl_version_from_code
from ncdoc.evidence.nccl_tests_model import Device, GroupResult, NcclTestsFacts, Row

_KEEP_ENV = ("NCCL_", "UCX_", "FI_", "CUDA_VISIBLE_DEVICES", "OMPI_MCA_", "NVSHMEM_", "TORCH_NCCL_")


def _num(v: Any) -> float | None:
    """A finite number from a JSON value (a number or its text); None for anything else."""
    if isinstance(v, bool) or v is None:
        return None
    if isinstance(v, int):
        return float(v) if -(1 << 64) < v < (1 << 64) else None
    if isinstance(v, float):
        return v if v - v == 0 else None
    return float_or_none(str(v).strip())


def _int(v: Any) -> int | None:
    n = _num(v)
    return int(n) if n is not None else None


def _group(g: Any, per_iter: Any) -> GroupResult | None:
    if not isinstance(g, dict):
        return None
    extra = None
    if isinstance(per_iter, dict):
        extra = {"i_min": _num(per_iter.get("min_us")), "i_max": _num(per_iter.get("max_us")),
                 "i_p99": _num(per_iter.get("p99_us")), "i_cv%": _num(per_iter.get("cv_pct"))}
    t = g.get("time", g.get("cpu_time"))
    return GroupResult(_num(t), _num(g.get("alg_bw")), _num(g.get("bus_bw")), _num(g.get("nwrong")), extra)


def facts_from_json(data: str | dict, source: str = "") -> NcclTestsFacts:
    if isinstance(data, str):
        try:
            data = load_data(data)
        except ValueError:
            data = {}
    if not isinstance(data, dict):
        data = {}
    book = CitationBook()
    f: dict[str, Any] = {"runs": 1 if data.get("results") is not None else 0, "headers": 0, "table_headers": 0,
                         "summaries": 0, "device_listings": 0, "nccl_lines": 0, "errors": [], "avg": [],
                         "truncation": [], "_wrong_json": True}
    args = data.get("args") if isinstance(data.get("args"), list) else []
    if args and str(args[0]).rsplit("/", 1)[-1].endswith(("_perf", "_perf_mpi")):
        f["collective"], f["collective_source"] = collective_name(str(args[0])), "json"
    code = _int(data.get("nccl_version"))
    f["nccl_version"] = nccl_version_from_code(code) if code else None
    if data.get("version") is not None:
        f["tests_version"] = f"json-{data.get('version')}"
    cfg = data.get("config") if isinstance(data.get("config"), dict) else {}
    keys = {"nthreads": "nthread", "ngpus": "ngpus", "minimum_bytes": "minbytes", "maximum_bytes": "maxbytes",
            "step_factor": "step", "step_bytes": "step", "warmup_iters": "warmup_iters", "iterations": "iters",
            "aggregated_iterations": "agg_iters", "validation": "validation", "graph": "graph"}
    f["config"] = {ours: _int(cfg[theirs]) for theirs, ours in keys.items() if theirs in cfg}
    if "step_factor" in cfg:
        f["config"]["step_kind"] = "factor"
    elif "step_bytes" in cfg:
        f["config"]["step_kind"] = "bytes"
    devices = []
    listed = data.get("devices") if isinstance(data.get("devices"), list) else cfg.get("devices")
    for d in listed if isinstance(listed, list) else []:
        if isinstance(d, dict) and _int(d.get("rank")) is not None:
            devices.append(Device(rank=_int(d.get("rank")), host=str(d.get("hostname", "")), pid=_int(d.get("pid")),
                                  group=_int(d.get("group")), device=_int(d.get("device")),
                                  bus_id=d.get("device_hex"), name=str(d.get("device_info", "")).strip()))
    f["device_listings"] = 1 if devices else 0
    rows = []
    per_iter = cputime = False
    for i, r in enumerate(data.get("results") or []):
        if not isinstance(r, dict) or _int(r.get("size")) is None:
            continue
        oop = _group(r.get("out_of_place"), r.get("out_of_place_per_iter"))
        ip = _group(r.get("in_place"), r.get("in_place_per_iter"))
        per_iter = per_iter or "out_of_place_per_iter" in r
        cputime = cputime or any(isinstance(g, dict) and "cpu_time" in g for g in (r.get("out_of_place"),
                                                                                  r.get("in_place")))
        root = _int(r.get("root"))
        rows.append(Row(_int(r.get("size")), _int(r.get("count")), r.get("type"), r.get("redop"), root, oop, ip,
                        None, 0, i + 1, oop is not None and ip is not None))
    oob = data.get("out_of_bounds")
    if isinstance(oob, dict):
        f["oob"], f["oob_ok"] = _int(oob.get("count")), oob.get("okay") if isinstance(oob.get("okay"), bool) else None
    avg = data.get("average_bus_bandwidth")
    if isinstance(avg, dict) and _num(avg.get("bandwidth")) is not None:
        f["avg"].append(_num(avg.get("bandwidth")))
        f["avg_runs"] = {0: _num(avg.get("bandwidth"))}
        f["summaries"] = 1
    f["errors"] = [str(e) for e in (data.get("errors") or []) if e][:16]
    if "end_time" not in data:
        f["truncation"].append("the JSON has no end_time: the run did not finish")
    env = {}
    for item in data.get("env") or []:
        if isinstance(item, str) and "=" in item and item.startswith(_KEEP_ENV):
            k, v = item.split("=", 1)
            env[k] = v
    f["env"] = env
    return derive(f, rows, devices, (), per_iter, False, cputime, book, source, "json", "count")
