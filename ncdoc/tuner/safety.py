"""What the tuner may recommend: only settings `ncdoc lint` passes for the NCCL version in use.

Safe by construction, checked again at the end:

* the search space never holds a value lint warns about or rejects (`NCCL_ALGO`, `NCCL_PROTO`,
  thread and CTA counts are NCCL's debugging knobs: NC1005) nor one equal to NCCL's default for
  that release (`NCCL_IB_SPLIT_DATA_ON_QPS=0` from 2.20); a deprecated variable is searched as its
  successor (`NCCL_MIN_NCHANNELS` as `NCCL_MIN_CTAS` from 2.17), then judged like any other;
* variables of today's environment that lint flags are measured without: every trial runs on the
  environment minus them, the baseline with them, so the final comparison shows what removing
  them costs;
* before a file is written the whole environment is linted once more (`blocking`); a file that
  would lint with a warning or an error is not written, and the tune says why.

Lint runs in process, as `ncdoc lint --nccl-version V` would: the env rules, site policy
and config included.
"""

from __future__ import annotations

from functools import lru_cache
from typing import Mapping

from ncdoc.tuner.knowledge import load_knowledge
from ncdoc.tuner.space import Hardware, SearchSpace

BLOCKING = ("warning", "error")


@lru_cache(maxsize=1)
def _selection():
    from ncdoc.engine.selection import resolve
    return resolve(default_fail_on="warning", families=("env",))


def lint(values: Mapping[str, str], version: str | None) -> list[str]:
    """`ncdoc lint` of exactly these values for `version`: its warnings and errors, one line each."""
    from ncdoc.engine.rules import Context
    from ncdoc.snapshot import EnvValue, NcclEnv, Status

    env = NcclEnv(Status.ok("ncdoc tune"), tuple(EnvValue(k, str(v), "ncdoc tune") for k, v in values.items()))
    report = _selection().run(Context(env=env, nccl_version=version))
    return [f"{f.code} {f.name}: {f.message}" for f in report.findings if f.severity in BLOCKING]


@lru_cache(maxsize=4096)
def _lint_one(name: str, value: str, version: str | None) -> tuple[str, ...]:
    return tuple(lint({name: value}, version))


def blocking(values: Mapping[str, str], version: str | None) -> list[str]:
    """What stops an environment from being written (empty: lint passes it without a warning)."""
    return lint(values, version)


def flagged(values: Mapping[str, str], version: str | None) -> dict[str, str]:
    """The variables of `values` lint warns about on their own, with the first reason."""
    out = {}
    for name, value in values.items():
        found = _lint_one(name, str(value), version)
        if found:
            out[name] = found[0]
    return out


def successor(name: str, version: str | None) -> tuple[str, str] | None:
    """(replacement, why) for a variable `version` deprecates in favour of another it reads."""
    from ncdoc.nccl.parse import version_cmp
    from ncdoc.nccl.variables import lookup

    info = lookup(name)
    if not info or not info.get("replacement") or not info.get("deprecated_since"):
        return None
    if version and version_cmp(version, info["deprecated_since"]) < 0:
        return None
    new = lookup(info["replacement"])
    if new and version and new.get("since") and version_cmp(version, new["since"]) < 0:
        return None
    return info["replacement"], f"deprecated since NCCL {info['deprecated_since']}"


def excluded(name: str, value: str, version: str | None) -> str | None:
    """Why `name=value` must not be recommended on `version` (None: it may)."""
    if load_knowledge().is_default(name, value, version):
        return f"it is NCCL's default in {version or 'this release'}"
    found = _lint_one(name, value, version)
    if found:
        return f"ncdoc lint: {found[0].split(':', 1)[0]}"
    return None


def safe_space(space: SearchSpace, hw: Hardware, collectives) -> SearchSpace:
    """`space` narrowed to the hardware, with every value the tuner may not recommend left out."""
    version = hw.nccl_version
    return space.for_hardware(hw, collectives, exclude=lambda n, v: excluded(n, v, version),
                              rename=lambda n: successor(n, version))


def without_defaults(values: Mapping[str, str], version: str | None) -> tuple[dict[str, str], list[str]]:
    """`values` without the ones equal to NCCL's default (they change nothing), and notes."""
    know = load_knowledge()
    kept, notes = {}, []
    for name, value in values.items():
        if know.is_default(name, str(value), version):
            notes.append(f"{name}={value} left out: it is NCCL's default in {version or 'this release'}")
        else:
            kept[name] = value
    return kept, notes
