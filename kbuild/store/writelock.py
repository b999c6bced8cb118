"""One writer at a time of a project's own files: its sources.yml and its notes.

`kbuild add`, `learn`, `confirm`, `forget` (and the MCP tool `learn`) each read these files,
decide, and write them back. Two at once would each write what it read, and the second would
drop the first's change (a listing, an append). Each holds an exclusive lock on the project's
folder while it reads, checks and writes, so the second reads what the first wrote: a listing is
kept, and a delta written against the revision the first replaced is refused.
"""
from __future__ import annotations

import fcntl
import os
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

_held: dict[Path, int] = {}  # folders this process holds, with how many times: a lock taken again inside is held already


@contextmanager
def editing(project_folder: Path) -> Iterator[None]:
    """Hold the project's write lock (an flock on its folder, made if missing) until the block
    ends; another command waits for it. The build never takes it: it only reads these files, and
    each is replaced whole (atomic_write), so it reads a version, never half of one."""
    folder = project_folder.resolve()
    if folder in _held:
        _held[folder] += 1
        try:
            yield
        finally:
            _held[folder] -= 1
        return
    folder.mkdir(parents=True, exist_ok=True)
    fd = os.open(folder, os.O_RDONLY)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)  # waits while another command writes (Ctrl-C still stops it)
        _held[folder] = 1
        try:
            yield
        finally:
            del _held[folder]
            fcntl.flock(fd, fcntl.LOCK_UN)
    finally:
        os.close(fd)
