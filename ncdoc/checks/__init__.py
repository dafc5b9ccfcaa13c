"""Check functions: the rules that need logic, registered with `ncdoc.engine.rules.check`.

Each module here registers its functions at import. The registry (ncdoc.engine.ruleset) imports
only the modules the selected rules need, using the map compiled into rules/compiled.json;
`import_all` imports every module in MODULES (compiling, tests, `ncdoc rules`).
"""

from __future__ import annotations

# The one list of check modules. A module not written yet is skipped by import_all;
# a rule naming one of its functions then fails the registry test, not a user's run.
MODULES = (
    "ncdoc.checks.env",         # the env alone: names, values, shadowing
    "ncdoc.checks.env_node",    # the env against the node: HCA lists, interfaces, NIC count, GDR level
    "ncdoc.checks.roce_gid",    # the env against the node's RoCE GID tables (or the log)
    "ncdoc.checks.node",        # the node: RDMA stack, GPUDirect, fabric manager
    "ncdoc.checks.topology",    # GPU-NIC placement, VMs that hide the PCIe tree
    "ncdoc.checks.links",       # link health: port state, rate, errors, MTU, PCIe width
    "ncdoc.checks.policy",      # site policy packs (ncdoc.engine.policy)
    "ncdoc.checks.evidence",    # NCCL logs and nccl-tests output
)


# Modules whose every check reads run evidence (ctx.evidence: NCCL logs, nccl-tests output,
# pasted node evidence). When a run has no evidence at all (`ncdoc check`, `ncdoc lint`),
# their checks are skipped with NO_EVIDENCE without importing them.
EVIDENCE_MODULES = ("ncdoc.checks.evidence", "ncdoc.checks.evidence_log", "ncdoc.checks.evidence_tests",
                    "ncdoc.checks.evidence_failures")
NO_EVIDENCE = "no NCCL log or nccl-tests output given"


def import_all() -> list[str]:
    """Import every check module that exists; return the names imported."""
    import importlib
    done = []
    for mod in MODULES:
        try:
            importlib.import_module(mod)
        except ModuleNotFoundError as exc:
            if exc.name != mod:
                raise
            continue
        done.append(mod)
    return done
