#!/usr/bin/env python3
"""Run NCCL through PyTorch under chosen settings and keep each run's whole output as a log.

    python3 tests/capture/nccl_runs.py OUT_DIR [SCENARIO...]

Each scenario launches torchrun (one GPU, one or two ranks), runs one all-reduce of 256 MiB
with NCCL_DEBUG=INFO and the scenario's variables, and writes OUT_DIR/<scenario>.log (stdout
and stderr together, as a job log has them) plus OUT_DIR/<scenario>.rc. The failing scenarios
are failures NCCL reports on any node; they need no second node to happen.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

WORKER = """
import os, torch, torch.distributed as dist
torch.cuda.set_device(0)
dist.init_process_group("nccl", device_id=torch.device("cuda:0"))
x = torch.ones(64 << 20, device="cuda")
for _ in range(int(os.environ.get("ALL_REDUCES", "1"))):
    dist.all_reduce(x)
torch.cuda.synchronize()
print(f"rank {dist.get_rank()}: all_reduce ok, x[0]={x[0].item()}", flush=True)
dist.destroy_process_group()
"""

BASE = {"NCCL_DEBUG": "INFO", "NCCL_DEBUG_SUBSYS": "INIT,NET,ENV,GRAPH,TUNING", "PYTHONUNBUFFERED": "1"}
SCENARIOS: dict[str, tuple[int, dict[str, str]]] = {
    "h200_1rank_info": (1, {}),
    "h200_net_ib_forced": (1, {"NCCL_NET": "IB"}),
    "h200_ifname_missing": (1, {"NCCL_SOCKET_IFNAME": "ib0"}),
    "h200_2ranks_one_gpu": (2, {}),
    "h200_ifname_lo": (1, {"NCCL_SOCKET_IFNAME": "lo"}),
    "h200_coll_lines": (1, {"NCCL_DEBUG_SUBSYS": "INIT,COLL", "ALL_REDUCES": "20"}),
}


def run(out: Path, name: str) -> int:
    nproc, extra = SCENARIOS[name]
    worker = out / "_worker.py"
    worker.write_text(WORKER)
    env = {**os.environ, **BASE, **extra}
    cmd = [sys.executable, "-m", "torch.distributed.run", "--standalone", f"--nproc-per-node={nproc}", str(worker)]
    with (out / f"{name}.log").open("wb") as log:
        log.write(("$ " + " ".join(f"{k}={v}" for k, v in {**BASE, **extra}.items() if k not in ("PYTHONUNBUFFERED", "ALL_REDUCES"))
                   + " torchrun --standalone --nproc-per-node=%d all_reduce.py\n" % nproc).encode())
        log.flush()
        try:
            rc = subprocess.run(cmd, stdout=log, stderr=subprocess.STDOUT, env=env, timeout=90).returncode
        except subprocess.TimeoutExpired:
            rc = 124
    (out / f"{name}.rc").write_text(f"{rc}\n")
    worker.unlink()
    return rc


def main(argv: list[str]) -> int:
    if not argv:
        print(__doc__, file=sys.stderr)
        return 2
    out = Path(argv[0])
    out.mkdir(parents=True, exist_ok=True)
    for name in argv[1:] or list(SCENARIOS):
        print(f"{name}: rc {run(out, name)}", flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
