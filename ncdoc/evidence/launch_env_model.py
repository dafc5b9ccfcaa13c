"""What a job was launched with, as read from its launch material: every assignment with its line
and how it was made, the effective values, the shadowed ones and the names passed through unset.
Which names count is decided here too (RELEVANT_PREFIXES): the readers keep only those."""

from __future__ import annotations

from ncdoc.startup.record import record
TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any

from ncdoc.snapshot import EnvValue, NcclEnv, Status

# Variables that change what NCCL (or the transport under it) does.
RELEVANT_PREFIXES = ("NCCL_", "UCX_", "FI_", "NVSHMEM_", "OMPI_MCA_", "PMIX_MCA_", "TORCH_NCCL_", "CUDA_",
                     "NVIDIA_VISIBLE_DEVICES", "SHARP_", "HCOLL_", "MLX5_", "RDMAV_", "IBV_", "UCC_",
                     "GLOO_SOCKET_IFNAME", "TP_SOCKET_IFNAME", "MASTER_ADDR", "MASTER_PORT", "LD_LIBRARY_PATH",
                     "LD_PRELOAD", "HOROVOD_", "AWS_OFI_NCCL_", "OFI_NCCL_")


def relevant(name: str) -> bool:
    return name.startswith(RELEVANT_PREFIXES)


@record
class LaunchEntry:
    value: EnvValue              # name, value, source, line
    how: str                     # "export", "assignment", "command prefix", "mpirun -x", "srun --export", ...


@record
class PassThrough:
    name: str                    # passed on with no value in this file (`-x NAME`, `--export=NAME`)
    line: int
    how: str


@record
class LaunchEnv:
    source: str
    entries: tuple[LaunchEntry, ...] = ()   # every assignment, in file order
    values: tuple[EnvValue, ...] = ()       # effective: the last assignment of each name
    shadowed: tuple[EnvValue, ...] = ()     # assignments a later one overrides (or an unset removes)
    inherited: tuple[PassThrough, ...] = ()
    cut_at_line: int | None = None          # reading stopped here: the file made MAX_ENTRIES assignments before

    def get(self, name: str) -> str | None:
        return next((v.value for v in self.values if v.name == name), None)

    def as_dict(self) -> dict[str, str]:
        return {v.name: v.value for v in self.values}

    def to_nccl_env(self) -> NcclEnv:
        """The Snapshot section the lint rules read."""
        return NcclEnv(status=Status.ok(f"launch:{self.source}"), values=self.values, shadowed=self.shadowed)

    def to_facts(self) -> dict[str, Any]:
        how = {(e.value.name, e.value.line): e.how for e in self.entries}
        return {
            "env": self.as_dict(),
            "env_entries": [{"name": e.value.name, "value": e.value.value, "line": e.value.line, "how": e.how}
                            for e in self.entries],
            "env_shadowed": [{"name": v.name, "value": v.value, "line": v.line, "how": how.get((v.name, v.line))}
                             for v in self.shadowed],
            "env_inherited": [{"name": p.name, "line": p.line, "how": p.how} for p in self.inherited],
            **({"env_cut_at_line": self.cut_at_line} if self.cut_at_line is not None else {}),
        }
