"""What the numbers in NCCL error messages mean: ibv_wc_status, errno, ncclResult_t, CUDA errors.

Names and numbers come from libibverbs' `enum ibv_wc_status`, Linux errno, NCCL's
`ncclResult_t`/`ncclGetErrorString` and the CUDA runtime/driver error tables; the one-line
meanings say what the code usually points at in an NCCL job.
"""

from __future__ import annotations

# enum ibv_wc_status (infiniband/verbs.h), with what each means for an NCCL connection.
IBV_WC_STATUS: dict[int, tuple[str, str]] = {
    0: ("IBV_WC_SUCCESS", "success"),
    1: ("IBV_WC_LOC_LEN_ERR", "local length error: a message was longer than the receive buffer"),
    2: ("IBV_WC_LOC_QP_OP_ERR", "local QP operation error: an invalid work request was posted"),
    3: ("IBV_WC_LOC_EEC_OP_ERR", "local EE context operation error"),
    4: ("IBV_WC_LOC_PROT_ERR", "local protection error: the NIC could not access the (GPU) buffer; "
                               "with GPUDirect RDMA often PCIe ACS or a broken peer-memory registration"),
    5: ("IBV_WC_WR_FLUSH_ERR", "work request flushed: the QP went to error state after an earlier failure "
                               "(a consequence; look for the first error)"),
    6: ("IBV_WC_MW_BIND_ERR", "memory window bind error"),
    7: ("IBV_WC_BAD_RESP_ERR", "bad response from the remote side"),
    8: ("IBV_WC_LOC_ACCESS_ERR", "local access error: the local memory key lacks the permission"),
    9: ("IBV_WC_REM_INV_REQ_ERR", "remote invalid request: the peer rejected the request (MTU/size mismatch, "
                                  "or the remote QP is gone)"),
    10: ("IBV_WC_REM_ACCESS_ERR", "remote access error: the peer's memory key or permissions were refused "
                                  "(peer buffer deregistered, or the peer process died)"),
    11: ("IBV_WC_REM_OP_ERR", "remote operation error: the peer could not complete the operation"),
    12: ("IBV_WC_RETRY_EXC_ERR", "transport retry counter exceeded: packets were not acknowledged in time; "
                                 "the peer is unreachable or the fabric drops packets (link, MTU, routing, "
                                 "RoCE GID/PFC/ECN, cross-rail)"),
    13: ("IBV_WC_RNR_RETRY_EXC_ERR", "receiver-not-ready retry counter exceeded: the peer posted no receive "
                                     "buffer in time"),
    14: ("IBV_WC_LOC_RDD_VIOL_ERR", "local RDD violation"),
    15: ("IBV_WC_REM_INV_RD_REQ_ERR", "remote invalid RD request"),
    16: ("IBV_WC_REM_ABORT_ERR", "remote aborted the operation"),
    17: ("IBV_WC_INV_EECN_ERR", "invalid EE context number"),
    18: ("IBV_WC_INV_EEC_STATE_ERR", "invalid EE context state"),
    19: ("IBV_WC_FATAL_ERR", "fatal error in the NIC"),
    20: ("IBV_WC_RESP_TIMEOUT_ERR", "response timeout"),
    21: ("IBV_WC_GENERAL_ERR", "general error"),
}

# Linux errno values NCCL prints (strerror text -> (number, symbol, meaning for NCCL)).
ERRNO_BY_TEXT: dict[str, tuple[int, str, str]] = {
    "operation not permitted": (1, "EPERM", "not permitted (missing capability, e.g. IPC_LOCK in a container)"),
    "no such file or directory": (2, "ENOENT", "a device or file is missing"),
    "input/output error": (5, "EIO", "I/O error from the driver"),
    "bad file descriptor": (9, "EBADF", "bad file descriptor"),
    "resource temporarily unavailable": (11, "EAGAIN", "resource temporarily unavailable"),
    "cannot allocate memory": (12, "ENOMEM", "out of memory (often the locked-memory limit: ulimit -l)"),
    "permission denied": (13, "EACCES", "permission denied"),
    "device or resource busy": (16, "EBUSY", "device or resource busy"),
    "no such device": (19, "ENODEV", "no such device"),
    "invalid argument": (22, "EINVAL", "invalid argument (for QP transitions: wrong GID index, port or MTU)"),
    "too many open files": (24, "EMFILE", "too many open files (raise ulimit -n)"),
    "no space left on device": (28, "ENOSPC", "no space left (e.g. /dev/shm too small)"),
    "broken pipe": (32, "EPIPE", "the peer closed the connection"),
    "message too long": (90, "EMSGSIZE", "message too long"),
    "protocol not supported": (93, "EPROTONOSUPPORT", "protocol not supported"),
    "operation not supported": (95, "EOPNOTSUPP", "operation not supported"),
    "address already in use": (98, "EADDRINUSE", "address already in use (port clash)"),
    "cannot assign requested address": (99, "EADDRNOTAVAIL", "the address is not on this host "
                                                              "(wrong interface or NCCL_COMM_ID)"),
    "network is down": (100, "ENETDOWN", "network is down"),
    "network is unreachable": (101, "ENETUNREACH", "no route to that network from the chosen interface"),
    "connection reset by peer": (104, "ECONNRESET", "the peer reset the connection (its process likely died)"),
    "no buffer space available": (105, "ENOBUFS", "no buffer space available"),
    "connection timed out": (110, "ETIMEDOUT", "the peer did not answer in time (unreachable address, "
                                               "firewall, or for QP transitions a remote GID/rail the NIC "
                                               "cannot reach)"),
    "connection refused": (111, "ECONNREFUSED", "nothing listens at that address/port: the peer process "
                                                "is not up yet, died, or a firewall rejects it"),
    "host is down": (112, "EHOSTDOWN", "host is down"),
    "no route to host": (113, "EHOSTUNREACH", "no route to that host from the chosen interface "
                                              "(wrong NCCL_SOCKET_IFNAME, or a firewall)"),
}
ERRNO_BY_NUMBER: dict[int, tuple[str, str, str]] = {
    num: (text, sym, meaning) for text, (num, sym, meaning) in ERRNO_BY_TEXT.items()
}

# ncclResult_t (nccl.h) and the text ncclGetErrorString gives.
NCCL_RESULT: dict[int, tuple[str, str]] = {
    0: ("ncclSuccess", "no error"),
    1: ("ncclUnhandledCudaError", "unhandled cuda error"),
    2: ("ncclSystemError", "unhandled system error"),
    3: ("ncclInternalError", "internal error"),
    4: ("ncclInvalidArgument", "invalid argument"),
    5: ("ncclInvalidUsage", "invalid usage"),
    6: ("ncclRemoteError", "remote process exited or there was a network error"),
    7: ("ncclInProgress", "NCCL operation in progress"),
}
NCCL_RESULT_BY_TEXT: dict[str, int] = {text: code for code, (_, text) in NCCL_RESULT.items() if code}
NCCL_RESULT_BY_NAME: dict[str, int] = {name: code for code, (name, _) in NCCL_RESULT.items()}

# CUDA errors NCCL reports, by the text cudaGetErrorString / cuGetErrorString give.
CUDA_ERROR_BY_TEXT: dict[str, tuple[int, str, str]] = {
    "invalid argument": (1, "cudaErrorInvalidValue", "a CUDA call was given an invalid argument (from NCCL's own "
                                                     "calls usually a driver or Fabric Manager state problem)"),
    "out of memory": (2, "cudaErrorMemoryAllocation", "the GPU ran out of memory"),
    "initialization error": (3, "cudaErrorInitializationError", "CUDA could not initialise"),
    "cuda driver version is insufficient for cuda runtime version": (
        35, "cudaErrorInsufficientDriver", "the driver is older than the CUDA runtime"),
    "invalid device function": (98, "cudaErrorInvalidDeviceFunction",
                                "the binary holds no kernel for this GPU: built without its architecture"),
    "all cuda-capable devices are busy or unavailable": (
        46, "cudaErrorDevicesUnavailable", "GPUs busy or in exclusive-process mode"),
    "no cuda-capable device is detected": (100, "cudaErrorNoDevice", "no GPU visible to the process"),
    "invalid device ordinal": (101, "cudaErrorInvalidDevice", "the GPU index does not exist "
                                                               "(CUDA_VISIBLE_DEVICES / local rank mapping)"),
    "device kernel image is invalid": (200, "cudaErrorInvalidKernelImage",
                                       "the kernel image does not load on this GPU (built for another architecture)"),
    "no kernel image is available for execution on the device": (
        209, "cudaErrorNoKernelImageForDevice", "the binary holds no kernel image for this GPU's architecture: it "
                                                "was built without this compute capability"),
    "peer access is not supported between these two devices": (
        217, "cudaErrorPeerAccessUnsupported", "P2P is not possible between these GPUs"),
    "the provided ptx was compiled with an unsupported toolchain": (
        222, "cudaErrorUnsupportedPtxVersion", "the PTX was built by a newer CUDA than the driver supports: the "
                                               "driver is too old for this build"),
    "the operation cannot be performed in the present state": (
        401, "cudaErrorIllegalState", "the call is not allowed in the GPU's present state: for NVLS multicast "
                                      "memory the Fabric Manager / NVSwitch state (restarted without a GPU reset, "
                                      "not running, or no fabric state in this container)"),
    "named symbol not found": (500, "cudaErrorSymbolNotFound",
                               "a kernel the library looks up is not in its binary: for NCCL's own kernels, a libnccl "
                               "built without this GPU's architecture"),
    "an illegal memory access was encountered": (700, "cudaErrorIllegalAddress", "a kernel faulted"),
    "unspecified launch failure": (719, "cudaErrorLaunchFailure", "a kernel faulted"),
    "operation not supported": (801, "cudaErrorNotSupported", "operation not supported on this system"),
    "system not yet initialized": (802, "cudaErrorSystemNotReady",
                                   "the system is not ready: on NVSwitch systems the Fabric Manager is not "
                                   "running or has not finished initialising"),
    "system has unsupported display driver / cuda driver combination": (
        803, "cudaErrorSystemDriverMismatch", "driver and CUDA versions do not match"),
    "forward compatibility was attempted on non supported hw": (
        804, "cudaErrorCompatNotSupportedOnDevice", "CUDA forward compatibility is not supported here"),
    "unknown error": (999, "cudaErrorUnknown",
                      "unknown error: on NVSwitch/NVLS systems typically the Fabric Manager is not running, "
                      "was restarted without a GPU reset, or reports an error"),
}
CUDA_ERROR_BY_CODE: dict[int, tuple[str, str, str]] = {
    code: (text, name, meaning) for text, (code, name, meaning) in CUDA_ERROR_BY_TEXT.items()
}


def ibv_wc_status(code: int) -> tuple[str, str]:
    return IBV_WC_STATUS.get(code, (f"IBV_WC_STATUS_{code}", "unknown completion status"))


def errno_from_text(text: str) -> tuple[int | None, str | None, str]:
    """(number, symbol, meaning) for an strerror() text found in `text`, longest match first."""
    low = text.lower()
    for key in sorted(ERRNO_BY_TEXT, key=len, reverse=True):
        if key in low:
            num, sym, meaning = ERRNO_BY_TEXT[key]
            return num, sym, meaning
    return None, None, ""


def errno_from_number(num: int) -> tuple[str | None, str]:
    got = ERRNO_BY_NUMBER.get(num)
    return (got[1], got[2]) if got else (None, "")


def cuda_error(code: int | None, text: str) -> tuple[int | None, str | None, str]:
    """(code, name, meaning) of a CUDA error given its number and/or its message text."""
    low = text.strip().strip("'\"").lower()
    if code is not None and code in CUDA_ERROR_BY_CODE:
        _, name, meaning = CUDA_ERROR_BY_CODE[code]
        return code, name, meaning
    for key, (num, name, meaning) in CUDA_ERROR_BY_TEXT.items():
        if low.startswith(key) or (len(low) >= 8 and key.startswith(low)):
            return num, name, meaning
    return code, None, ""
