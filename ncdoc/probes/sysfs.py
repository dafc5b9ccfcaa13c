"""A small reader for /sys and /proc, rooted anywhere.

Every probe reads the machine through one `SysfsReader`, so the same code runs on the live
node (root "/"), on a capture of another node's /sys and /proc, and on the fake trees the
fixture machines write. Symlinks are resolved *inside* the root: real sysfs links are
relative (../../devices/pci0000:00/...), and an absolute one is re-rooted instead of
escaping to this machine's /sys.
"""

from __future__ import annotations

import errno
import os

# No `re` here: the probes run on every `ncdoc check`, whose start-up budget the regex machinery
# would take a fifth of. Names are matched by hand.
_HEX = frozenset("0123456789abcdef")
_MAX_LINK_HOPS = 40


def _hex(text: str, lo: int, hi: int) -> bool:
    return lo <= len(text) <= hi and all(c in _HEX for c in text)


def is_pci_address(name: str) -> bool:
    """"0000:18:00.0" (domain of 4 to 8 hex digits, bus, device, function 0-7), lower case as sysfs writes it."""
    domain, _, rest = name.partition(":")
    bus, _, rest = rest.partition(":")
    dev, dot, fn = rest.partition(".")
    return (_hex(domain, 4, 8) and _hex(bus, 2, 2) and _hex(dev, 2, 2) and dot == "."
            and len(fn) == 1 and fn in "01234567")


def is_host_bridge(name: str) -> bool:
    """"pci0000:00": a host bridge's folder under /sys/devices."""
    if not name.startswith("pci"):
        return False
    domain, colon, bus = name[3:].partition(":")
    return bool(colon) and _hex(domain, 4, 8) and _hex(bus, 2, 2)


class SysfsReader:
    """Reads files under `root`; paths given to it are absolute paths as seen on that machine."""

    def __init__(self, root: str = "/"):
        self.root = os.path.abspath(root or "/")
        self.live = self.root == "/"

    # ---------------------------------------------------------------- paths

    def path(self, rel: str) -> str:
        """The path on this machine of `rel` ("/sys/class/net" or "sys/class/net")."""
        return os.path.join(self.root, rel.lstrip("/"))

    def exists(self, rel: str) -> bool:
        return os.path.lexists(self.path(rel))

    def is_dir(self, rel: str) -> bool:
        return os.path.isdir(self.path(rel))

    def realpath(self, rel: str) -> str | None:
        """Resolve every symlink of `rel` within the root; returns a rooted path ("/sys/devices/...").

        None when a link loops. A dangling link still resolves (as the kernel's readlink -f would
        not): captures often keep the link but not its target, and the target's *name* is the fact.
        """
        todo = [p for p in rel.split("/") if p]
        done: list[str] = []
        hops = 0
        while todo:
            part = todo.pop(0)
            if part == ".":
                continue
            if part == "..":
                if done:
                    done.pop()
                continue
            candidate = os.path.join(self.root, *done, part)
            if os.path.islink(candidate):
                hops += 1
                if hops > _MAX_LINK_HOPS:
                    return None
                try:
                    target = os.readlink(candidate)
                except OSError:
                    done.append(part)
                    continue
                if target.startswith("/"):
                    done = []
                todo = [p for p in target.split("/") if p] + todo
            else:
                done.append(part)
        return "/" + "/".join(done)

    def link_name(self, rel: str) -> str | None:
        """Last component of the (resolved) target of a symlink such as .../driver; None if no link."""
        if not os.path.islink(self.path(rel)):
            return None
        resolved = self.realpath(rel)
        return os.path.basename(resolved) if resolved else None

    # ---------------------------------------------------------------- reads

    def read(self, rel: str) -> str:
        """The file's text without its trailing newline; raises OSError as the kernel does."""
        with open(self.path(rel), "rb") as fh:
            data = fh.read(1 << 20)
        return data.decode("utf-8", "replace").rstrip("\n")

    def text(self, rel: str) -> str | None:
        """`read` stripped of surrounding whitespace, or None when missing or unreadable."""
        try:
            return self.read(rel).strip()
        except (OSError, ValueError):
            return None

    def read_int(self, rel: str) -> int | None:
        """An integer file: decimal or 0x-hex ("0x3a4" lid files); None when missing or not a number."""
        value = self.text(rel)
        if value is None:
            return None
        try:
            return int(value, 0) if value.lower().startswith(("0x", "-0x")) else int(value)
        except ValueError:
            return None

    def read_bytes(self, rel: str, limit: int = 4096) -> bytes | None:
        try:
            with open(self.path(rel), "rb") as fh:
                return fh.read(limit)
        except OSError:
            return None

    def listdir(self, rel: str) -> list[str] | None:
        """Sorted entries; [] when the directory does not exist; None when it cannot be read."""
        try:
            return sorted(os.listdir(self.path(rel)))
        except FileNotFoundError:
            return []
        except NotADirectoryError:
            return []
        except OSError:
            return None

    def why_not(self, rel: str) -> str:
        """A short reason why `rel` cannot be listed or read, for Status reasons."""
        try:
            os.stat(self.path(rel))
        except FileNotFoundError:
            return f"{rel} does not exist"
        except PermissionError:
            return f"{rel}: permission denied"
        except OSError as exc:
            return f"{rel}: {os.strerror(exc.errno or errno.EIO)}"
        if not os.access(self.path(rel), os.R_OK):
            return f"{rel}: permission denied"
        return f"{rel} cannot be read"


def pci_address_of(path: str | None) -> str | None:
    """The PCI address a resolved device path ends in, e.g. ".../0000:18:00.0" -> "0000:18:00.0"."""
    if not path:
        return None
    name = os.path.basename(path.rstrip("/"))
    return name if is_pci_address(name) else None


def numa_of(value: int | None) -> int | None:
    """sysfs writes -1 for "no NUMA affinity"."""
    return value if value is not None and value >= 0 else None
