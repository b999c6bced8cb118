"""The file system as the engine sees it: hashed inputs, atomic outputs, paths kept inside the root."""
from __future__ import annotations

import errno
import os
import stat
import tempfile
import time
from collections.abc import Callable
from pathlib import Path, PurePosixPath
from typing import BinaryIO

from .hashing import ABSENT, NOT_A_FILE, hash_bytes, hash_stream

# A file changed within this window of its hashing could change again inside the same mtime
# tick; such a file is hashed again next time rather than trusted by its stat (git's "racy" rule).
RACY_NS = 2_000_000_000

TEMP_SUFFIX = ".kbuild-tmp"
# Stat entries looked up alone before the hasher loads them all: an edit looks up a few dozen
# (the files it reads, and the pages the build before wrote too recently to trust their stats)
# of the thousands a large store has, and a check, which hashes every file, loads them all.
LOOKED_UP_ONE_BY_ONE = 256


def _umask() -> int:
    mask = os.umask(0)
    os.umask(mask)
    return mask


_UMASK = _umask()  # read once: setting it to read it is not thread-safe

StatKey = tuple[int, int, int]  # size, mtime_ns, inode
StatEntry = tuple[StatKey, str]  # a file's stat, recorded with its hash


class PathEscapesRoot(ValueError):
    pass


class NotARegularFile(OSError):
    pass


def open_regular(path: str | os.PathLike[str]) -> BinaryIO:
    """Open a regular file for reading, never waiting on a FIFO (O_NONBLOCK makes its open
    return at once; a regular file ignores the flag)."""
    fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK)
    try:
        mode = os.fstat(fd).st_mode
        if stat.S_ISDIR(mode):
            raise IsADirectoryError(errno.EISDIR, "Is a directory", str(path))
        if not stat.S_ISREG(mode):
            raise NotARegularFile(f"{path} is not a regular file (a pipe, socket or device)")
        return os.fdopen(fd, "rb")
    except BaseException:
        os.close(fd)
        raise


def read_regular(path: str | os.PathLike[str]) -> tuple[bytes, os.stat_result]:
    """A regular file's bytes (never waiting on a FIFO, as open_regular) and its stat, taken
    on the open file, so the stat kept with the hash is never of a later version. Read with
    os.read, not through a file object made for each read: `kbuild check` reads every page of
    the store (benchmarks/check_phases.py)."""
    fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK)
    try:
        st = os.fstat(fd)
        if stat.S_ISDIR(st.st_mode):
            raise IsADirectoryError(errno.EISDIR, "Is a directory", str(path))
        if not stat.S_ISREG(st.st_mode):
            raise NotARegularFile(f"{path} is not a regular file (a pipe, socket or device)")
        data = os.read(fd, st.st_size + 1)
        more = os.read(fd, 1 << 20)  # until EOF: a read may return less, a file may have grown
        if more:
            parts = [data, more]
            while more := os.read(fd, 1 << 20):
                parts.append(more)
            data = b"".join(parts)
        return data, st
    finally:
        os.close(fd)


def atomic_write(path: Path, data: bytes | list[bytes | memoryview], durable: bool = True) -> None:
    """Write to a temporary file beside `path`, flush it, then rename it into place. `data` may
    be pieces, written one after the other (a lock patched from views of the old one).

    A crash leaves the old file or the new one, never a torn one. `durable=False` skips the
    fsync, for files whose loss after a power cut costs only a recomputation (a cache entry that
    reads back empty or damaged is a miss): on these disks an fsync costs about a millisecond,
    and it blocks the event loop.

    The temporary file has a name no one can guess, created with O_EXCL|O_NOFOLLOW (mkstemp):
    a symlink committed under a temporary name is never followed, and two writers of one file
    (a call cache shared by two builds) never write into each other's. The rename replaces
    `path` itself, so a page or a lock that is a symlink is replaced, and its target untouched.
    """
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=TEMP_SUFFIX, dir=path.parent)
    try:
        with os.fdopen(fd, "wb") as out:
            os.fchmod(fd, 0o666 & ~_UMASK)  # mkstemp makes it 0600; a page is as readable as any file
            if isinstance(data, bytes):
                out.write(data)
            else:
                out.writelines(data)
            out.flush()
            if durable:
                os.fsync(out.fileno())
        os.replace(tmp, path)
    except BaseException:
        try:
            os.unlink(tmp)
        except FileNotFoundError:
            pass
        raise


class OutputArea:
    """Where outputs may be written and removed: relative paths inside one folder of the root
    (the whole root by default), never through a symlinked folder out of it, never into a .git
    folder or onto the paths kbuild keeps for itself (the lock, the state folder). The last
    component is not resolved: a page that is a symlink is replaced, not followed."""

    def __init__(self, root: Path, folder: str = "", reserved: tuple[Path, ...] = ()) -> None:
        self.root = root.resolve()
        self.folder = PurePosixPath(folder) if folder else None
        self.inside = self.root / self.folder if self.folder is not None else self.root
        self.reserved = tuple(PurePosixPath(p.resolve().relative_to(self.root))
                              for p in reserved if p.resolve().is_relative_to(self.root))
        # the same as parts, for `problem`, which checks a lock's every output on import: on
        # strings, not PurePosixPath (part of a fresh clone's check going from 1.27 s to 0.99 s
        # at 4,132 facts, `python benchmarks/commands.py --facts 4940`)
        self._folder_parts = list(self.folder.parts) if self.folder is not None else []
        self._reserved_parts = [list(r.parts) for r in self.reserved]

    def problem(self, relative: str, *, resolve: bool = True) -> str | None:
        """Why `relative` may not be an output, or None when it may. `resolve=False` checks the
        words of the path only (no system call: a lock's every output is checked on import)."""
        parts = [part for part in relative.split("/") if part and part != "."]  # PurePosixPath's parts
        if relative.startswith("/") or ".." in parts or not parts or "\0" in relative:
            return f"output path {relative!r} must be relative and inside {self.root}"
        if parts[:len(self._folder_parts)] != self._folder_parts:
            return f"output path {relative!r} is outside {self.folder}/, where every output lies"
        if ".git" in parts:
            return f"output path {relative!r} is inside a .git folder"
        if any(parts[:len(r)] == r for r in self._reserved_parts):
            return f"output path {relative!r} is kbuild's own (its lock or its state)"
        if resolve and not (self.root / relative).parent.resolve().is_relative_to(self.inside):
            return f"output path {relative!r} leads outside {self.inside} (through a symlink)"
        return None

    def path(self, relative: str) -> Path:
        why = self.problem(relative)
        if why is not None:
            raise PathEscapesRoot(why)
        return self.root / relative


class FileHasher:
    """Content hashes of files, with a stat fast path so an unchanged file is never read again.

    Keys are paths relative to the root when inside it (so the lock is portable), else absolute.
    """

    def __init__(self, root: Path, load_stats: Callable[[], dict[str, StatEntry]],
                 load_stat: Callable[[str], StatEntry | None] | None = None, keep: bool = True) -> None:
        """The stat cache is looked up an entry at a time (`load_stat`), for the first few files
        a command hashes, and loaded whole (`load_stats`) once it needs more: an edit hashes a
        few files, a check every file. Without `keep` the hasher only reads (a look before a
        build, a check) and records nothing."""
        self.root = root
        self._prefix = os.path.join(str(root), "")  # os.path on strings: pathlib costs more than the stat itself
        self._load_stats = load_stats
        self._load_stat = load_stat
        self._keep = keep
        self._looked_up = 0
        self._stat_cache: dict[str, StatEntry] | None = None
        self._changes: dict[str, StatEntry | None] = {}  # changed while the cache is not loaded (None: forgotten)
        self.changed_stats: set[str] = set()  # changed since the state last saved them
        self.restated: set[str] = set()  # every entry changed in this build
        self._this_build: dict[str, str] = {}
        self._now_ns = time.time_ns()

    @property
    def stat_cache(self) -> dict[str, StatEntry]:
        """Every entry, loaded once, with this build's changes."""
        if self._stat_cache is None:
            cache = self._load_stats()
            for key, entry in self._changes.items():
                if entry is None:
                    cache.pop(key, None)
                else:
                    cache[key] = entry
            self._stat_cache = cache
        return self._stat_cache

    def recorded(self, key: str) -> StatEntry | None:
        """The stat recorded with a file's hash, if any."""
        if self._stat_cache is not None:
            return self._stat_cache.get(key)
        if key in self._changes:
            return self._changes[key]
        if self._load_stat is not None and self._looked_up < LOOKED_UP_ONE_BY_ONE:
            self._looked_up += 1
            return self._load_stat(key)
        return self.stat_cache.get(key)

    def take_changes(self) -> dict[str, StatEntry | None]:
        """The entries changed since the last call (None: forgotten), for the state to save."""
        entries = self._stat_cache if self._stat_cache is not None else self._changes
        changes = {key: entries.get(key) for key in self.changed_stats}
        self.changed_stats.clear()
        return changes

    def _set(self, key: str, entry: StatEntry | None) -> None:
        self.changed_stats.add(key)
        self.restated.add(key)
        if self._stat_cache is None:
            self._changes[key] = entry
        elif entry is None:
            self._stat_cache.pop(key, None)
        else:
            self._stat_cache[key] = entry

    def unchanged_since(self, key: str, recorded: StatKey) -> bool:
        """Whether the file still has the stat a settled build recorded with its hash."""
        try:
            st = os.stat(self.full(key))
        except OSError:
            return False
        return (st.st_size, st.st_mtime_ns, st.st_ino) == tuple(recorded)

    def key(self, path: str | os.PathLike[str]) -> str:
        p = Path(path)
        if not p.is_absolute():
            return p.as_posix()
        try:
            return p.relative_to(self.root).as_posix()
        except ValueError:
            return p.as_posix()

    def full(self, key: str) -> str:
        return key if key.startswith("/") else self._prefix + key  # os.path.join's result, without its call

    def hash(self, key: str) -> str:
        known = self._this_build.get(key)
        if known is not None:
            return known
        digest = self._hash_uncached(key)
        self._this_build[key] = digest
        return digest

    def read(self, key: str) -> tuple[bytes, str]:
        """Read a file and hash exactly the bytes read, so the recorded hash is of what was used.
        Only a regular file: opening a FIFO for reading would wait for a writer forever."""
        data, st = read_regular(self.full(key))
        digest = hash_bytes(data)
        self._this_build[key] = digest
        self._remember(key, digest, st)
        return data, digest

    def wrote(self, key: str, digest: str) -> None:
        self._this_build[key] = digest
        self._remember(key, digest)

    def forget(self, key: str) -> None:
        self._this_build.pop(key, None)
        if self.recorded(key) is not None:
            self._set(key, None)

    def _hash_uncached(self, key: str) -> str:
        path = self.full(key)
        try:
            st = os.stat(path)
        except (FileNotFoundError, NotADirectoryError):
            return ABSENT
        if stat.S_ISDIR(st.st_mode):
            return ABSENT
        if not stat.S_ISREG(st.st_mode):
            return NOT_A_FILE
        cached = self.recorded(key)
        if cached is not None and cached[0] == (st.st_size, st.st_mtime_ns, st.st_ino):
            return cached[1]
        try:
            with open_regular(path) as f:
                digest = hash_stream(f)
        except NotARegularFile:
            return NOT_A_FILE  # replaced by a pipe between the stat and the open
        self._remember(key, digest, st)
        return digest

    def _remember(self, key: str, digest: str, st: os.stat_result | None = None) -> None:
        if not self._keep:
            return  # only reading: nothing is saved, and this build knows the digest (_this_build)
        try:
            st = st or os.stat(self.full(key))
        except FileNotFoundError:
            return
        if self._now_ns - st.st_mtime_ns < RACY_NS:
            if self.recorded(key) is not None:
                self._set(key, None)
            return
        self._set(key, ((st.st_size, st.st_mtime_ns, st.st_ino), digest))
