"""Write a file whole or not at all: the one writer of every file proton_ctypes produces.

The profiles (:mod:`proton_ctypes.writers`) and the viewer's HTML report both go through
:func:`write_atomic`.  The bytes go to a temporary file next to the target, which is then
renamed over it (``os.replace``), so a reader sees the old file or the new one, never a
part.  The temporary file is created with mode ``0o666`` and the process umask takes its
bits away, exactly as ``open(path, "w")`` would (``tempfile.mkstemp`` would give 0600).
Missing folders on the way to the target are created (``mkdir -p``).

This module imports nothing of the package: the profiler and the viewer may both use it.
"""
from __future__ import annotations

import errno
import os

#: mode asked for a new file; the umask removes bits from it, as for ``open()``
FILE_MODE = 0o666
#: random bytes in a temporary file's name
TEMP_NAME_BYTES = 6
#: temporary names tried before giving up (a clash needs another writer of the same name)
TEMP_NAME_ATTEMPTS = 100
_FLAGS = os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_BINARY", 0) | getattr(os, "O_CLOEXEC", 0)


def _create_temp(folder: str, base: str):
    """Create and open a new temporary file in ``folder``; return ``(fd, path)``."""
    tmp = ""
    for _ in range(TEMP_NAME_ATTEMPTS):
        tmp = os.path.join(folder, f".{base}.{os.getpid()}.{os.urandom(TEMP_NAME_BYTES).hex()}.tmp")
        try:
            return os.open(tmp, _FLAGS, FILE_MODE), tmp
        except FileExistsError:
            continue
    raise FileExistsError(errno.EEXIST, "no free temporary file name", tmp)


def _make_folder(folder: str) -> None:
    """Create ``folder`` and its missing parents; a file in the way is ``NotADirectoryError``."""
    try:
        os.makedirs(folder, exist_ok=True)
    except FileExistsError:  # a component is a file: say so rather than "File exists"
        raise NotADirectoryError(errno.ENOTDIR, os.strerror(errno.ENOTDIR), folder) from None


def write_atomic(path, data) -> None:
    """Write ``data`` (``str``, UTF-8 encoded, or bytes) to ``path``, whole or not at all.

    Missing parent folders are created.  On any error the target is left as it was and
    the temporary file is removed; the error (an ``OSError`` for the file system, naming
    ``path`` or the folder in the way, never the temporary file) is raised.
    """
    path = os.fspath(path)
    payload = data.encode("utf-8") if isinstance(data, str) else data
    folder = os.path.dirname(os.path.abspath(path))
    _make_folder(folder)
    try:
        fd, tmp = _create_temp(folder, os.path.basename(path))
    except OSError as e:
        raise _naming(e, path) from None
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(payload)
        os.replace(tmp, path)
    except BaseException as e:
        try:
            os.unlink(tmp)
        except OSError:
            pass
        if isinstance(e, OSError) and e.filename == tmp:
            raise _naming(e, path) from None
        raise


def _naming(e: OSError, path: str) -> OSError:
    """``e`` naming the target ``path`` rather than the temporary file."""
    if e.errno is None:
        return e
    return type(e)(e.errno, e.strerror, path)
