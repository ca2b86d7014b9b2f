"""Write a file whole or not at all: a temporary file in the same folder, then a rename."""
from __future__ import annotations

import os
import tempfile


def write_atomic(path: str, data) -> None:
    """Write ``data`` (str or bytes) to ``path`` atomically (temp file + ``os.replace``)."""
    folder = os.path.dirname(os.path.abspath(path))
    fd, tmp = tempfile.mkstemp(prefix="." + os.path.basename(path) + ".", suffix=".tmp", dir=folder)
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(data.encode() if isinstance(data, str) else data)
        os.replace(tmp, path)
    except BaseException:
        try:
            os.unlink(tmp)
        except OSError:
            pass
        raise
