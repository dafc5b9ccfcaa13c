"""Reading a file the user named (the one reader, and the one test of "is this text"), and writing
one (the one atomic writer).

Every file a user gives ncdoc (a snapshot, an env file, a policy pack, a config, evidence for
triage or topo, a tuner data file, a machine spec) is read here, so each cannot-use reason is
one line that names the file, worded the same wherever it is read: missing, a directory,
unreadable, too large, binary, not UTF-8 text, empty. "-" is standard input. Every file ncdoc
writes (a snapshot, env files, the tuner's outputs) is written by write_user_file: whole or
not at all, never through a symlink planted at its name.

On the `ncdoc check` path (its snapshot): only builtins, no pathlib or re.
"""

from __future__ import annotations

from ncdoc.errors import InputError

SAMPLE_BYTES = 65536         # bytes looked at to decide whether a file is text
MAX_BYTES = 256 << 20        # a file read whole; larger evidence is streamed by its parser

_CONTROL = bytes(b for b in range(32) if b not in b"\t\n\r\f\v\x1b") + b"\x7f"
_CONTROL_BYTES = tuple(_CONTROL)


def binary_reason(sample: bytes) -> str | None:
    """Why `sample` (the head of a file) is not text, or None when it is."""
    if not sample:
        return None
    if b"\x00" in sample:
        return "it is binary (it contains NUL bytes), not text"
    # most text has no control byte at all: one search per control byte (memchr) tells that in a
    # quarter of the time of the count (a snapshot on the check path is sampled whole)
    if any(map(sample.__contains__, _CONTROL_BYTES)):
        controls = len(sample) - len(sample.translate(None, _CONTROL))
        if controls > max(8, len(sample) // 100):
            return "it is binary (control characters), not text"
    if sample.isascii():
        return None                      # ASCII is UTF-8: nothing can fail to decode (most files are)
    # the last 3 bytes may be a character cut by the sample's end
    text = (sample[:-3] if len(sample) > 3 else sample).decode("utf-8", "replace")
    if text.count("\ufffd") > 4 + len(sample) // 1000:
        return "it is binary or not UTF-8 text"
    return None


def display_name(path) -> str:
    """How an error names the file: "<stdin>" for "-"."""
    return "<stdin>" if str(path) == "-" else str(path)


def open_user_file(path):
    """The named file opened for reading bytes; InputError when it is missing, a directory or
    cannot be opened. The caller closes it."""
    name = str(path)
    try:
        return open(name, "rb")
    except FileNotFoundError:
        raise InputError("no such file", path=name) from None
    except IsADirectoryError:
        raise InputError("is a directory, not a file", path=name) from None
    except PermissionError:
        raise InputError("cannot read file (permission denied)", path=name) from None
    except OSError as exc:
        raise InputError("cannot read file", path=name, cause=exc.strerror or str(exc)) from None


def read_user_bytes(path, limit: int | None = None) -> bytes:
    """Up to `limit` bytes of the named file (all without one); "-" reads standard input."""
    name = str(path)
    if name == "-":
        import sys
        stream = sys.stdin.buffer
        return stream.read() if limit is None else stream.read(limit)
    with open_user_file(name) as fh:
        try:
            if limit is not None:
                import os
                size = os.fstat(fh.fileno()).st_size     # a regular file: read it whole, no big buffer
                if size and size <= limit:
                    return fh.read()
            return fh.read() if limit is None else fh.read(limit)
        except IsADirectoryError:               # some systems open a directory and fail on read
            raise InputError("is a directory, not a file", path=name) from None
        except OSError as exc:
            raise InputError("cannot read file", path=name, cause=exc.strerror or str(exc)) from None


def decode_text(raw: bytes, name: str, what: str = "text") -> str:
    """`raw` as text (a UTF-8 BOM dropped); InputError when it is binary or not UTF-8."""
    reason = binary_reason(raw[:SAMPLE_BYTES])
    if reason:
        raise InputError(f"cannot be read as {what}: {reason}", path=name)
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError:
        # a stray byte in a comment is tolerated; many are a file in another encoding
        text = raw.decode("utf-8", "replace")
        if text.count("\ufffd") > 4:
            raise InputError(f"cannot be read as {what}: it is binary or not UTF-8 text", path=name) from None
    return text[1:] if text[:1] == "\ufeff" else text


def read_user_text(path, what: str = "text", *, empty_ok: bool = False, max_bytes: int = MAX_BYTES) -> str:
    """The text of the file the user named ("-": standard input).

    InputError, one line naming the file, when it is missing, a directory, unreadable, larger
    than `max_bytes`, binary, not UTF-8 text, or (unless `empty_ok`) empty or blank. `what`
    says what the file was meant to be ("an env file"), for the message."""
    name = display_name(path)
    raw = read_user_bytes(path, max_bytes + 1)
    if len(raw) > max_bytes:
        raise InputError(f"is larger than {max_bytes >> 20} MiB; too large for {what}", path=name)
    text = decode_text(raw, name, what)
    if not empty_ok and (not text or text.isspace()):
        raise InputError("is empty", path=name)
    return text


def write_user_file(path, text: str, what: str = "the file", *, make_dirs: bool = False,
                    follow_symlinks: bool = False) -> str:
    """Write `text` to `path` so that a reader sees the old file or the whole new one, never a part:
    a temporary file in the same folder, flushed to disk, renamed over it; a new file gets the mode the
    umask gives, a replaced one keeps its own.

    A symlink at `path` that leads to a file (or nowhere) is refused unless `follow_symlinks`: one
    planted in a shared folder would make ncdoc overwrite whatever it points at (~/.bashrc). A device
    or pipe (/dev/stdout, a FIFO, a link to one) is streamed into, since renaming over it would replace
    the device itself. The folder is made when `make_dirs`, else a missing one is an error. Failures are
    InputError naming the path, the file left as it was. Returns `path` as given."""
    import os
    import stat
    import tempfile

    def failed(exc: OSError, where: str = "") -> InputError:
        return InputError(f"cannot write {what}", path=where or path, cause=exc.strerror or str(exc))

    given = str(path)
    try:
        data = text.encode("utf-8")
    except UnicodeEncodeError as exc:
        raise InputError(f"cannot write {what}: the text holds a character UTF-8 cannot encode "
                         f"({exc.object[exc.start:exc.start + 1]!r})", path=given) from None
    try:
        target_mode = os.stat(given).st_mode        # what the name leads to (/dev/stdout: the pipe or tty)
    except OSError:
        target_mode = None
    # the process's own streams (/dev/stdout, /dev/fd/1) are written into whatever they are, as a shell's > does
    stream = given in ("/dev/stdout", "/dev/stderr") or given.startswith(("/dev/fd/", "/proc/self/fd/"))
    if os.path.islink(given) and not follow_symlinks and not stream and (
            target_mode is None or stat.S_ISREG(target_mode) or stat.S_ISDIR(target_mode)):
        raise InputError(f"cannot write {what}: it is a symbolic link (to {os.readlink(given)}); ncdoc does not "
                         "write through one: remove it or name its target", path=given)
    path = os.path.realpath(given)
    if target_mode is not None and stat.S_ISDIR(target_mode):
        raise InputError(f"cannot write {what}: that is a folder", path=path)
    if target_mode is not None and (stream or not stat.S_ISREG(target_mode)):
        try:        # non-blocking open: a FIFO nobody reads is an error (ENXIO), not a hang
            # a regular file behind /dev/stdout is appended to: the shell's > emptied it, >> asked for the end
            fd = os.open(given, os.O_WRONLY | os.O_NONBLOCK | (os.O_APPEND if stat.S_ISREG(target_mode) else 0))
        except OSError as exc:
            if exc.errno == 6:      # ENXIO
                raise InputError(f"cannot write {what}: it is a pipe that nothing reads", path=path) from None
            raise failed(exc) from None
        try:
            os.set_blocking(fd, True)
            with os.fdopen(fd, "wb") as fh:
                fh.write(data)
        except OSError as exc:
            raise failed(exc) from None
        return given
    folder = os.path.dirname(path)
    if not os.path.isdir(folder):
        if not make_dirs:
            raise InputError(f"cannot write {what}: no such folder", path=folder)
        try:
            os.makedirs(folder, exist_ok=True)
        except OSError as exc:
            raise failed(exc, folder) from None
    try:
        mode = stat.S_IMODE(os.stat(path).st_mode)       # replacing a file: keep its mode
    except OSError:
        umask = os.umask(0)
        os.umask(umask)
        mode = 0o666 & ~umask
    try:
        fd, tmp = tempfile.mkstemp(prefix=f".{os.path.basename(path)}.", suffix=".tmp", dir=folder)
    except OSError as exc:
        raise failed(exc) from None
    try:
        with os.fdopen(fd, "wb") as fh:
            fh.write(data)
            fh.flush()
            os.fsync(fh.fileno())
        os.chmod(tmp, mode)
        os.replace(tmp, path)
    except BaseException as exc:
        try:
            os.unlink(tmp)
        except OSError:
            pass
        if isinstance(exc, OSError):
            raise failed(exc) from None
        raise
    return given


__all__ = ["SAMPLE_BYTES", "MAX_BYTES", "binary_reason", "display_name", "open_user_file", "read_user_bytes",
           "decode_text", "read_user_text", "write_user_file"]
