"""`nvidia-smi topo -m` (also `topo --matrix`, `topo -mp`) text -> PathMatrix.

Handles tab- or space-separated output, the CPU Affinity / NUMA Affinity / GPU NUMA ID
columns (or a user's lone NUMA column), " X " on the diagonal, legacy SOC (= SYS), the NIC
Legend ("NIC0: mlx5_0"), old drivers that name NIC columns mlx5_0 instead of NIC0 (labels
kept as in the input), and text cut off mid-table (kept, marked truncated).
"""

from __future__ import annotations

import re

from ncdoc.errors import InputError
from ncdoc.evidence.lazy_re import lazy
from ncdoc.snapshot import PathMatrix, Status
from ncdoc.startup.compiled_patterns import precompiled

_ESCAPE = lazy(r"\x1b\[[0-9;]*[A-Za-z]")
_PATH = lazy(r"X|NV\d+|PIX|PXB|PHB|NODE|SYS|SOC|C2C|NVB|P2C|PXN")
_PATHS_GLUED = lazy(rf"(?:{_PATH.pattern})+")
_LEGEND_ENTRY = lazy(r"^\s*(NIC\d+)\s*:\s*(\S+)\s*$")
_TRAILING = (("CPU", "Affinity"), ("NUMA", "Affinity"), ("GPU", "NUMA", "ID"), ("NUMA",))
# A column label: GPUn, NICn, or the RDMA device name old drivers print (mlx5_0, bnxt_re1, efa_0). Anything
# else is no device: taking every header token as one made a pasted 16 KB line a matrix of 2,000 devices.
_LABEL = precompiled(r"(?:GPU|NIC)\d{1,4}|[a-z][a-z0-9_.-]{0,31}")
MAX_LABELS = 256              # GPUs and NICs of one node, with room: an NVL72 tray has 4 GPUs, an HGX 8 + 10 NICs


def _norm(cell: str) -> str:
    c = cell.strip().upper()
    return "SYS" if c == "SOC" else c


def _split_header(tokens: list[str]) -> tuple[list[str], list[str]]:
    """Header tokens -> (labels, trailing column names such as "CPU Affinity")."""
    labels: list[str] = []
    trailing: list[str] = []
    i = 0
    while i < len(tokens):
        for words in _TRAILING:
            if tuple(t.upper() for t in tokens[i:i + len(words)]) == tuple(w.upper() for w in words):
                trailing.append(" ".join(words[:3]))
                i += len(words)
                break
        else:
            if trailing or not _LABEL.fullmatch(tokens[i]):
                trailing.append(tokens[i])      # an unknown word: a column name, not a device
            else:
                labels.append(tokens[i])
            i += 1
    if len(labels) > MAX_LABELS:
        raise InputError(f"the `nvidia-smi topo -m` header names {len(labels)} GPU and NIC columns; no node has "
                         f"more than {MAX_LABELS}")
    return labels, trailing


def _cells(tokens: list[str], n: int) -> tuple[list[str], list[str], bool]:
    """Row tokens after the label -> (n path cells at most, trailing values, saw a broken cell)."""
    cells: list[str] = []
    broken = False
    i = 0
    while i < len(tokens) and len(cells) < n:
        t = tokens[i].upper()
        if _PATH.fullmatch(t):
            cells.append(t)
        elif _PATHS_GLUED.fullmatch(t):  # copy-paste glitch: "PIXNODE"
            cells.extend(_PATH.findall(t))
        else:
            if re.fullmatch(r"[A-Z]{1,3}\d*", t):  # a cell cut mid-word ("PI", "NO")
                broken = True
                i += 1
            break
        i += 1
    return [_norm(c) for c in cells[:n]], tokens[i:], broken


def _is_header(tokens: list[str]) -> bool:
    return bool(tokens) and re.fullmatch(r"GPU\d+", tokens[0]) is not None and (
        len(tokens) == 1 or not _PATH.fullmatch(tokens[1].upper()))


def _strip_host_prefix(lines: list[str]) -> list[str]:
    """pdsh/clush output ("node1: GPU0 ...") -> the first host's lines without the prefix."""
    if any(_is_header(ln.split()) for ln in lines):
        return lines
    for ln in lines:
        t = ln.split()
        if len(t) > 1 and t[0].endswith(":") and _is_header(t[1:]):
            prefix = t[0]
            return [x.split(prefix, 1)[1] for x in lines if x.lstrip().startswith(prefix)]
    return lines


def parse_topo_matrix(text: str, source: str = "") -> PathMatrix:
    """Parse the first GPU/NIC matrix in `text`; InputError when there is none."""
    # nvidia-smi underlines the header row with terminal escapes even when writing to a file
    text = _ESCAPE.sub("", text)
    lines = _strip_host_prefix(text.replace("\r\n", "\n").replace("\r", "\n").split("\n"))
    start = next((k for k, ln in enumerate(lines) if _is_header(ln.split())), None)
    notes_truncated = False
    if start is not None:
        labels, trailing = _split_header(lines[start].split())
        body_from = start + 1
    else:
        # no header line (cut off above): take the labels from the rows themselves
        rows = [ln.split() for ln in lines]
        first = next((k for k, t in enumerate(rows)
                      if len(t) > 1 and re.fullmatch(r"GPU\d+", t[0]) and _PATH.fullmatch(t[1].upper())), None)
        if first is None:
            raise InputError("no `nvidia-smi topo -m` matrix found (no header line starting with GPU0)")
        labels = []
        for t in rows[first:]:
            if not t or not (_PATH.fullmatch(t[1].upper()) if len(t) > 1 else False) or not _LABEL.fullmatch(t[0]):
                break
            labels.append(t[0])
            if len(labels) > MAX_LABELS:
                raise InputError(f"the `nvidia-smi topo -m` rows name more than {MAX_LABELS} GPUs and NICs")
        trailing, body_from, notes_truncated = ["CPU Affinity", "NUMA Affinity", "GPU NUMA ID"], first, True
    if not labels:
        raise InputError("the `nvidia-smi topo -m` header names no GPU or NIC columns")
    label_set = set(labels)
    n = len(labels)

    matrix: dict[str, dict[str, str]] = {}
    cpu_aff: dict[str, str] = {}
    numa_aff: dict[str, str] = {}
    truncated = notes_truncated
    k = body_from
    last_row = body_from
    while k < len(lines):
        tokens = lines[k].split()
        if not tokens:
            if matrix:
                break
            k += 1
            continue
        if tokens[0] not in label_set or tokens[0] in matrix:
            break
        label = tokens[0]
        cells, rest, broken = _cells(tokens[1:], n)
        matrix[label] = {labels[c]: v for c, v in enumerate(cells)}
        if len(cells) < n or broken:
            truncated = True
        for col, val in zip(trailing, rest):
            if col == "CPU Affinity":
                cpu_aff[label] = val
            elif col in ("NUMA Affinity", "NUMA"):
                numa_aff[label] = val
        last_row = k
        k += 1
    if not matrix:
        raise InputError("the `nvidia-smi topo -m` header is not followed by any matrix row")
    if len(matrix) < n:
        truncated = True

    tail = lines[last_row + 1:]
    nic_names: dict[str, str] = {}
    legend_at = next((i for i, ln in enumerate(tail) if ln.strip().lower().startswith("nic legend")), None)
    if legend_at is not None:
        for ln in tail[legend_at + 1:]:
            m = _LEGEND_ENTRY.match(ln)
            if m and m.group(1) in label_set:
                nic_names[m.group(1)] = m.group(2)
            elif ln.strip() and nic_names:
                break
    for lab in labels:  # old drivers name NIC columns by device ("mlx5_0"): that is the name
        if not re.fullmatch(r"(GPU|NIC)\d+", lab):
            nic_names.setdefault(lab, lab)
    truncated = truncated or _legend_cut(tail, labels, nic_names, legend_at)
    return PathMatrix(status=Status.ok(source), labels=tuple(labels), matrix=matrix, nic_names=nic_names,
                      cpu_affinity=cpu_aff, numa_affinity=numa_aff, truncated=truncated)


def _legend_cut(tail: list[str], labels: list[str], nic_names: dict[str, str], legend_at: int | None) -> bool:
    """True when the text ends inside the Legend or NIC Legend block that nvidia-smi always completes."""
    text = [ln.strip() for ln in tail if ln.strip()]
    legend = next((i for i, ln in enumerate(text) if ln.lower().startswith("legend")), None)
    if legend is None:
        return False
    entries = []
    for ln in text[legend + 1:]:
        if ln.lower().startswith("nic legend"):
            break
        entries.append(ln)
    if legend_at is None:  # the last block is the Legend: complete once NV# is listed
        at_end = len(entries) == len(text) - legend - 1
        return at_end and not any(e.startswith("NV#") for e in entries)
    nic_labels = [lab for lab in labels if re.fullmatch(r"NIC\d+", lab)]
    return sum(1 for lab in nic_labels if lab in nic_names) < len(nic_labels)
