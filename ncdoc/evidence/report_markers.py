"""What a line must hold for each report reader of run output to find anything in it (the readers' own
markers, in one light module): the one list the held-text and the streamed reading both use, importable
without the readers' patterns, so a log that holds no report costs no compiled report pattern."""

# ncclras (ras_report): the report's own sections and entries, which need the lines around them; RAS lines
# of a log ("RAS declaring peer ...") and monitor events, read alone
RAS_REPORT_MARKERS = ("Communicators...", "Job summary", "considered dead", "Missing communicator data",
                      "compiled with CUDA", "operation counts", "have different status", "errors on ",
                      "ranks reported")
RAS_MARKERS = RAS_REPORT_MARKERS + ("RAS ", "PEER_")
# NCCL 2.31's diagnostics (nccl_diag)
DIAG_MARKERS = ("NCCL DIAG",)
# host command output (host_output): ulimit -a, nvidia-smi and NVML, the driver's version and its mismatches
HOST_MARKERS = ("locked memory", "NVML", "NVRM", "NVIDIA-SMI", "nvidia-smi", "Cuda compilation tools",
                "Cannot allocate memory", "ii  ", "driver on your system is too old", "driver version is insufficient",
                "is not compatible with the current PyTorch installation", "supports CUDA capabilities")

__all__ = ["RAS_REPORT_MARKERS", "RAS_MARKERS", "DIAG_MARKERS", "HOST_MARKERS"]
