#!/bin/bash
# Capture real evidence on a GPU node, for the fixtures under tests/fixtures/nodes and tests/fixtures/logs.
#
#   OUT=/some/dir NCCL_TESTS_SRC=/path/to/nccl-tests bash tests/capture/device_capture.sh
#
# Writes $OUT/capture.tgz (nvidia-smi answers, the gather_node.py tree, NCCL logs from nccl_runs.py,
# nccl-tests outputs built against the NCCL wheel PyTorch uses) and $OUT/run.log. Every step has its
# own time limit, so one that hangs costs its limit and no more.
set -u
S=/tmp/ncdoc-capture
rm -rf "$S"; mkdir -p "$S"
exec > >(tee "$OUT/run.log") 2>&1
REPO=$PWD
export PYTHONPATH=$REPO PYTHONUNBUFFERED=1
step() { echo "== $(date +%T) $*"; }

step nvidia-smi
nvidia-smi -L
nvidia-smi > "$S/nvidia-smi.txt" 2>&1
nvidia-smi -q > "$S/nvidia-smi-q.txt" 2>&1
nvidia-smi -q -x > "$S/nvidia-smi-q.xml" 2>&1
nvidia-smi topo -m > "$S/nvidia-smi-topo-m.txt" 2>&1
nvidia-smi nvlink -s > "$S/nvidia-smi-nvlink-s.txt" 2>&1
ls -la /sys/class/infiniband /dev/infiniband > "$S/rdma-ls.txt" 2>&1
python3 -c "import torch, sys; print(torch.__version__, torch.version.cuda, torch.cuda.nccl.version(), sys.version)" \
    > "$S/versions.txt" 2>&1
cat "$S/versions.txt"

step gather_node
timeout 120 python3 tests/capture/gather_node.py "$S/node"; echo "gather rc=$?"
timeout 60 python3 -m ncdoc snapshot --json > "$S/ncdoc-snapshot.json" 2> "$S/ncdoc-snapshot.err"; echo "snapshot rc=$?"
timeout 60 python3 -m ncdoc check > "$S/ncdoc-check.txt" 2>&1; echo "check rc=$?"

step nccl_runs
timeout 420 python3 tests/capture/nccl_runs.py "$S/runs"

step nccl-tests build
# the NCCL wheel PyTorch loads: the folder holding include/nccl.h and lib/libnccl.so.2
NCCLDIR=$(python3 -c "
import glob, os, site
for s in site.getsitepackages():
    for h in glob.glob(s + '/nvidia/**/include/nccl.h', recursive=True):
        print(os.path.dirname(os.path.dirname(h))); raise SystemExit
")
echo "NCCL wheel: $NCCLDIR"; ls "$NCCLDIR" "$NCCLDIR/lib"
NVCC=$(command -v nvcc || ls /usr/local/cuda/bin/nvcc 2>/dev/null)
mkdir -p /tmp/nccl/lib
ln -sfn "$NCCLDIR/include" /tmp/nccl/include
ln -sf "$NCCLDIR/lib/libnccl.so.2" /tmp/nccl/lib/libnccl.so
rm -rf /tmp/nt; cp -r "$NCCL_TESTS_SRC" /tmp/nt
(cd /tmp/nt && timeout 300 make -j16 MPI=0 NCCL_HOME=/tmp/nccl CUDA_HOME="$(dirname "$(dirname "$NVCC")")" \
    NVCC_GENCODE="-gencode=arch=compute_90,code=sm_90" > "$S/nccl-tests-build.log" 2>&1); echo "build rc=$?"
tail -3 "$S/nccl-tests-build.log"
export LD_LIBRARY_PATH=/tmp/nccl/lib:$NCCLDIR/lib:${LD_LIBRARY_PATH:-}
B=/tmp/nt/build
nt() { local name=$1; shift; timeout 120 "$@" > "$S/$name" 2>&1; echo "$name rc=$?"; }

step nccl-tests runs
NCCL_DEBUG=INFO nt nt_all_reduce_info.txt "$B/all_reduce_perf" -b 8 -e 4G -f 2 -g 1
nt nt_all_reduce_json_run.txt "$B/all_reduce_perf" -b 1M -e 1G -f 4 -g 1 -J "$S/nt_all_reduce.json"
nt nt_all_gather.txt "$B/all_gather_perf" -b 1M -e 1G -f 4 -g 1
nt nt_sendrecv.txt "$B/sendrecv_perf" -b 1M -e 256M -f 4 -g 1
nt nt_reduce_scatter_check.txt "$B/reduce_scatter_perf" -b 1M -e 64M -f 2 -g 1 -c 1 -n 5
nt nt_all_reduce_g2_one_gpu.txt "$B/all_reduce_perf" -b 1M -e 8M -f 2 -g 2

step pack
tar czf "$OUT/capture.tgz" -C "$S" . && ls -la "$OUT"
