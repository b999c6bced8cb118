"""One build per store at a time."""
from __future__ import annotations

import fcntl
import os
from pathlib import Path

from .layout import StateFolder
from .report import BuildLocked


class BuildLock:
    """One build per store: an exclusive lock on a file in the state folder."""

    def __init__(self, state_dir: Path) -> None:
        self.path = StateFolder(state_dir).build_lock
        self.fd: int | None = None

    def __enter__(self) -> BuildLock:
        self.path.parent.mkdir(parents=True, exist_ok=True)
        fd = os.open(self.path, os.O_RDWR | os.O_CREAT, 0o644)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            holder = os.pread(fd, 64, 0).decode(errors="replace").strip() or "unknown"
            os.close(fd)
            raise BuildLocked(
                f"another kbuild (pid {holder}) is building this store; wait for it to finish or stop it"
            ) from None
        os.ftruncate(fd, 0)
        os.pwrite(fd, str(os.getpid()).encode(), 0)
        self.fd = fd
        return self

    def __exit__(self, *exc: object) -> None:
        if self.fd is not None:
            os.ftruncate(self.fd, 0)
            fcntl.flock(self.fd, fcntl.LOCK_UN)
            os.close(self.fd)
            self.fd = None


def wait_until_free(state_dir: Path) -> bool:
    """Wait while another build holds the store's lock; whether there was one to wait for."""
    path = StateFolder(state_dir).build_lock
    if not path.exists():
        return False
    fd = os.open(path, os.O_RDWR)
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            waited = False
        except BlockingIOError:
            fcntl.flock(fd, fcntl.LOCK_EX)  # blocks until the other build ends (Ctrl-C still stops it)
            waited = True
        fcntl.flock(fd, fcntl.LOCK_UN)
        return waited
    finally:
        os.close(fd)
