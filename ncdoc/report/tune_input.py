"""The one adapter that reads a tune output folder: summary.json, EXPLAIN.md and the Optuna study.

The tuner's outputs change shape over time (new keys, SIMULATED labels, a guard sweep), so this
module reads each piece defensively: what is there is used, what is missing or unreadable becomes
a line in `missing`, which the report shows where the section would be. Nothing here writes to
the folder or the study; a study storage that does not exist is never created (Optuna would).

This is the only module outside ncdoc/tuner that imports Optuna (tests/test_architecture.py names
it): the best-so-far history and the study's metric names are only in the study, and reading them
through Optuna's API keeps SQLite, RDB URLs and journal files alike.
"""

from __future__ import annotations

import json
import math
import os
import re
from dataclasses import dataclass, field
from typing import Any

from ncdoc.startup.compiled_patterns import precompiled


@dataclass(frozen=True)
class Trial:
    number: int
    value: float | None
    state: str                          # complete | stopped early | failed | not run | running | waiting
    params: dict[str, str] = field(default_factory=dict)
    reason: str = ""
    stage: str = ""                     # the tuner's stage: start | screen | refine | joint | ...


@dataclass(frozen=True)
class Effect:
    name: str
    value: str
    change_pct: float | None            # score change when the variable is removed from the tuned env
    sd_pct: float | None
    kept: bool
    why: str = ""
    bound_pct: float | None = None      # the confidence bound on the drop without it ("at least X %")
    confidence: str = ""                # of that bound ("97.5 %")


@dataclass(frozen=True)
class TuneData:
    folder: str
    summary: dict[str, Any] | None = None
    missing: tuple[str, ...] = ()       # what could not be read, in words
    simulated: bool | None = None
    study_name: str | None = None
    storage: str | None = None          # as the summary gives it
    storage_url: str | None = None      # what optuna-dashboard takes
    metric_names: tuple[str, ...] | None = None
    trials: tuple[Trial, ...] = ()
    sizes: dict[str, dict[str, list]] = field(default_factory=dict)     # role -> collective -> [[size, busbw]]
    expected: dict[str, float] = field(default_factory=dict)            # collective -> GB/s
    effects: tuple[Effect, ...] = ()
    candidates: tuple[dict[str, Any], ...] = ()
    guard: tuple[dict[str, Any], ...] | None = None
    guard_note: str = ""


_SIZE = precompiled(r"^\s*([0-9]+(?:\.[0-9]+)?)\s*([KMGT]?)i?B?\s*$", re.I)
_MULT = {"": 1, "K": 1 << 10, "M": 1 << 20, "G": 1 << 30, "T": 1 << 40}


def parse_size(text: str) -> int | None:
    """'8M' -> 8388608, '512' -> 512, '1G' -> 1073741824 (the tuner's format_size, read back)."""
    m = _SIZE.match(str(text))
    if not m:
        return None
    return int(float(m.group(1)) * _MULT[m.group(2).upper()])


def _float(text: str) -> float | None:
    try:
        return float(str(text).strip().replace(",", ""))
    except ValueError:
        return None


def _section(md: str, title: str) -> str:
    m = re.search(rf"^## {re.escape(title)}\s*$(.*?)(?=^## |\Z)", md, re.M | re.S)
    return m.group(1) if m else ""


def _table(text: str) -> list[list[str]]:
    rows = []
    for line in text.splitlines():
        line = line.strip()
        if line.startswith("|") and line.endswith("|") and not re.match(r"^\|[\s:|-]+\|$", line):
            rows.append([c.strip() for c in line.strip("|").split("|")])
    return rows[1:] if rows else []


def explain_sizes(md: str) -> tuple[dict[str, dict[str, list]], dict[str, float]]:
    """Baseline and tuned busbw per size, and the expected figure per collective, from EXPLAIN.md."""
    sec = _section(md, "Bus bandwidth by size")
    sizes: dict[str, dict[str, list]] = {"baseline": {}, "tuned": {}}
    for row in _table(sec):
        if len(row) < 4:
            continue
        size = parse_size(row[1])
        if size is None:
            continue
        for role, cell in (("baseline", row[2]), ("tuned", row[3])):
            bw = _float(cell)
            if bw is not None:
                sizes[role].setdefault(row[0], []).append([size, bw])
    expected = {m.group(1): float(m.group(2))
                for m in re.finditer(r"([a-z_]+): ([0-9]+(?:\.[0-9]+)?) GB/s", sec.split("\n\n")[0] if sec else "")}
    return {k: v for k, v in sizes.items() if v}, expected


_WHY_PCT = precompiled(r"without it the score (drops|changes) ([+-]?[0-9]+(?:\.[0-9]+)?) %")
_WHY_BOUND = precompiled(r"at least ([0-9]+(?:\.[0-9]+)?) % at ([0-9]+(?:\.[0-9]+)? %) confidence")
_TABLE_PCT = precompiled(r"([+-]?[0-9]+(?:\.[0-9]+)?) % ± ([0-9]+(?:\.[0-9]+)?) %")


def effects_of(summary: dict[str, Any], md: str) -> tuple[Effect, ...]:
    """Each variable of the minimal-env step: the change without it, its spread where EXPLAIN.md has it."""
    spread: dict[str, tuple[float, float]] = {}
    for row in _table(_section(md, "Recommended environment")):
        if len(row) >= 4:
            m = _TABLE_PCT.search(row[3])
            if m:
                spread[row[0].strip("`")] = (float(m.group(1)), float(m.group(2)))
    out = []
    for e in summary.get("minimal_env") or ():
        if not isinstance(e, dict) or "name" not in e:
            continue
        name, why = str(e["name"]), str(e.get("why", ""))
        change, sd = spread.get(name, (None, None))
        if change is None:
            m = _WHY_PCT.search(why)
            if m:
                change = -float(m.group(2)) if m.group(1) == "drops" else float(m.group(2))
        for key in ("change_pct", "effect_pct"):
            if isinstance(e.get(key), (int, float)):
                change = float(e[key])
        if isinstance(e.get("sd_pct"), (int, float)):
            sd = float(e["sd_pct"])
        bound = _WHY_BOUND.search(why)
        out.append(Effect(name, str(e.get("value", "")), change, sd, bool(e.get("kept")), why,
                          -float(bound.group(1)) if bound else None, bound.group(2) if bound else ""))
    return tuple(out)


def _guard(summary: dict[str, Any]) -> tuple[tuple[dict[str, Any], ...] | None, str]:
    """The guard sweep's rows, whatever key and shape the tuner gave them, else (None, why not)."""
    key = next((k for k in summary if "guard" in k.lower()), None)
    if key is None:
        return None, "this tune output records no guard sweep (summary.json has no guard entry)"
    g = summary[key]
    if g is None:
        return None, "no guard sweep ran: it measures a confirmed candidate against the baseline, and none was confirmed"
    rows = g.get("rows") or g.get("sizes") or g.get("results") if isinstance(g, dict) else g
    if isinstance(rows, list) and all(isinstance(r, dict) for r in rows):
        note = ""
        if isinstance(g, dict) and isinstance(g.get("regressions"), list) and "rounds" in g:
            slow = [str(x) for x in g["regressions"]]
            note = (f"{g['rounds']} rounds, baseline and recommended env in shuffled order; "
                    + ("no size slower beyond noise" if not slow else
                       f"{len(slow)} slower beyond noise: {', '.join(slow)[:300]}"))
        elif isinstance(g, dict):
            note = "; ".join(f"{k}: {v}" for k, v in g.items()
                             if k not in ("rows", "sizes", "results") and not isinstance(v, (list, dict)))
        return tuple(rows), note
    if isinstance(g, dict):
        return (g,), ""
    return None, f"summary.json's {key} is not a list of rows; shown as given: {str(g)[:200]}"


def _storage_url(storage: str | None, folder: str) -> tuple[str | None, str | None]:
    """(optuna URL or journal path, why not) for the study; never a path that does not exist."""
    if storage and "://" in storage:
        if storage.startswith("sqlite:///"):
            path = storage[len("sqlite:///"):]
            if not os.path.exists(path):
                return None, f"the study database {path} does not exist"
        return storage, None
    candidates = [storage] if storage else []
    candidates.append(os.path.join(folder, "study.db"))
    for path in candidates:
        if path and not os.path.isabs(path) and not os.path.exists(path):
            path = os.path.join(folder, os.path.basename(path))
        if path and os.path.exists(path):
            if path.endswith((".log", ".journal")):
                return path, None
            return f"sqlite:///{os.path.abspath(path)}", None
    return None, f"no study storage found ({storage or os.path.join(folder, 'study.db')})"


def _read_study(url: str, name: str | None) -> tuple[tuple[Trial, ...], tuple[str, ...] | None, str | None, str]:
    """(trials, metric names, study name, problem) through Optuna, read only."""
    try:
        import optuna
    except ImportError:
        return (), None, name, "Optuna is not installed: the trial history is not shown"
    optuna.logging.set_verbosity(optuna.logging.WARNING)
    try:
        if url.endswith((".log", ".journal")) and "://" not in url:
            from optuna.storages import JournalStorage
            from optuna.storages.journal import JournalFileBackend
            storage: Any = JournalStorage(JournalFileBackend(url))
        else:
            storage = url
        if name is None:
            names = optuna.get_all_study_names(storage)
            if len(names) != 1:
                return (), None, None, f"the storage holds {len(names)} studies and summary.json names none"
            name = names[0]
        study = optuna.load_study(study_name=name, storage=storage)
        trials = []
        for t in study.get_trials(deepcopy=False):
            state = {"COMPLETE": "complete", "FAIL": "failed", "PRUNED": "pruned"}.get(t.state.name,
                                                                                    t.state.name.lower())
            reason = str(t.user_attrs.get("ncdoc.failed", ""))
            if state in ("failed", "pruned") and "ncdoc.fail_kind" not in t.user_attrs and reason:
                state = "not run"       # a constraint reject or a duplicate: nothing was measured
            value = t.value if state == "complete" else None
            scores = t.user_attrs.get("ncdoc.scores")
            if state == "pruned" and "ncdoc.fail_kind" in t.user_attrs:
                state = "failed"        # the tuner records a run NCCL failed as pruned, with its kind
            elif state == "pruned" and ("ncdoc.stopped" in t.user_attrs or scores):
                # stopped early: its runs so far still say where it stood (the score of a complete trial
                # is exp of its mean log-score, ncdoc.tuner.study)
                state = "stopped early"
                if isinstance(scores, list) and scores and all(isinstance(x, (int, float)) for x in scores):
                    value = math.exp(sum(scores) / len(scores))
                reason = reason or str(t.user_attrs.get("ncdoc.stopped", ""))
            trials.append(Trial(t.number, value, state, {k: str(v) for k, v in t.params.items()}, reason,
                                str(t.user_attrs.get("ncdoc.stage", ""))))
        return tuple(trials), tuple(study.metric_names) if study.metric_names else None, name, ""
    except Exception as exc:        # a storage from another Optuna version, a locked or broken file
        return (), None, name, f"the study could not be read ({type(exc).__name__}: {str(exc)[:200]})"


def read_tune_dir(folder: str) -> TuneData:
    """Everything the report can show of one tune, and what is missing."""
    missing: list[str] = []
    if not os.path.isdir(folder):
        return TuneData(folder, missing=(f"{folder} is not a folder",))
    summary: dict[str, Any] | None = None
    path = os.path.join(folder, "summary.json")
    try:
        with open(path, encoding="utf-8") as fh:
            data = json.load(fh)
        summary = data if isinstance(data, dict) else None
        if summary is None:
            missing.append("summary.json is not a JSON object")
    except FileNotFoundError:
        missing.append("no summary.json in the folder (is it a tune output folder?)")
    except (OSError, ValueError, RecursionError) as exc:
        missing.append(f"summary.json could not be read ({exc})")
    md = ""
    try:
        with open(os.path.join(folder, "EXPLAIN.md"), encoding="utf-8", errors="replace") as fh:
            md = fh.read(4 << 20)
    except FileNotFoundError:
        missing.append("no EXPLAIN.md: the per-size table and the effects' spread are not shown")
    except OSError as exc:
        missing.append(f"EXPLAIN.md could not be read ({exc.strerror or exc})")
    s = summary or {}
    backend = s.get("backend") if isinstance(s.get("backend"), dict) else {}
    simulated = s.get("simulated") if isinstance(s.get("simulated"), bool) else (
        backend.get("backend") == "sim" if backend.get("backend") else None)
    sizes: dict[str, dict[str, list]] = {}
    for role in ("baseline", "tuned"):
        got = s.get(f"{role}_sizes")
        if isinstance(got, dict):
            sizes[role] = {str(c): [list(r[:2]) for r in rows if isinstance(r, (list, tuple)) and len(r) >= 2]
                           for c, rows in got.items() if isinstance(rows, list)}
    md_sizes, expected = explain_sizes(md) if md else ({}, {})
    for role, val in md_sizes.items():
        sizes.setdefault(role, val)
    if isinstance(s.get("expected_busbw"), dict):
        expected.update({str(k): float(v) for k, v in s["expected_busbw"].items() if isinstance(v, (int, float))})
    if not sizes and md:
        missing.append("EXPLAIN.md has no bus bandwidth table")
    guard, guard_note = _guard(s) if summary is not None else (None, "")
    name = s.get("study_name") if isinstance(s.get("study_name"), str) else None
    storage = s.get("storage") if isinstance(s.get("storage"), str) else None
    url, why = _storage_url(storage, folder)
    trials: tuple[Trial, ...] = ()
    metrics = None
    if url is None:
        missing.append(why + ": the trial history is not shown")
    else:
        trials, metrics, name, problem = _read_study(url, name)
        if problem:
            missing.append(problem)
    cands = tuple(c for c in s.get("candidates") or () if isinstance(c, dict))
    return TuneData(os.path.abspath(folder), summary, tuple(missing), simulated, name, storage, url, metrics, trials, sizes,
                    expected, effects_of(s, md), cands, guard, guard_note)


__all__ = ["TuneData", "Trial", "Effect", "read_tune_dir", "parse_size", "explain_sizes", "effects_of"]
