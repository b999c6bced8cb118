"""`kbuild check` answered from `kbuild.checked`: the record of a check that passed, committed.

A check is a function of files: the lock, every file in the store, the files the lock says the
graph read and wrote, the harness files, the code that ran (the Kbuildfile, the modules it and
kbuild loaded from the project and from kbuild, the rules' prompts), kbuild's version and the
environment that chooses the model. `kbuild check --record` writes, after a check that found
nothing, the content hash of each of them; a later check (a CI runner's fresh clone) that finds
every one the same says "ok" without running the Kbuildfile or reading the lock: one read and
hash per file, as `git status` on a fresh clone does. Any difference, or a record that does not
parse (a merge conflict in it), means the full check, which decides for itself.

What it does not see, as `kbuild.uptodate` does not: a Kbuildfile whose settings depend on
anything else (a file it reads itself, another environment variable, the libraries installed).
Like the lock, the record is a file anyone can edit: it saves honest work from being repeated,
and guards nothing against a hand that forges it (`kbuild check --full` ignores it).

This module is the whole of such a check (with `kbuild.entry`): os and xxhash, no more. The
record is lines, not JSON: importing json (and the re and enum it imports) and importlib.util
took 9 ms (`python -X importtime`) of the 29 ms such a check took at 113 facts
(`benchmarks/commands.py`), against 7 ms for `git status`.
"""
from __future__ import annotations

import os
import sys

import xxhash

from .inputs import loaded_modules, loaded_packages, store_files

RECORD = "kbuild.checked"
FORMAT = "kbuild.checked 1"
HEADER = "# `kbuild check --record` wrote this after a check that found nothing: commit it (docs/ci.md)"
LIBRARIES = {"site-packages", "dist-packages"}  # a virtual environment inside the project holds libraries
FIRST, PIECE = 1 << 16, 1 << 20
PASSED = "ok: every page is up to date, linked and grounded"  # kbuild.checks.formats.text([])


def file_hash(path: str) -> str | None:
    """The content hash of the file at `path`; None when there is none to read. os.open and
    os.read, not open(): a Python file object per file made hashing the 5,315 files of a store
    of 4,132 facts take 57-66 ms against 30-32 ms (the syscalls are most of either). The first
    read asks for 64 KiB, under malloc's threshold for mapping memory of its own: asking for 1 MiB
    made a fresh process's first pass over the 5,605 files its record names 127-138 ms against
    37 ms. (Timed in scratch scripts on this machine, warm page cache; `benchmarks/commands.py`
    times the whole command.)"""
    try:
        fd = os.open(path, os.O_RDONLY)
    except OSError:
        return None
    try:
        data = os.read(fd, FIRST)
        if len(data) < FIRST:
            return xxhash.xxh3_128_hexdigest(data)
        hasher = xxhash.xxh3_128(data)  # a large file (a PDF, the lock): hashed a piece at a time
        while piece := os.read(fd, PIECE):
            hasher.update(piece)
        return hasher.hexdigest()
    except OSError:
        return None
    finally:
        os.close(fd)


def environment() -> str:
    """The hash of what chooses the model (kbuild.model.settings, kbuild.model.choice): the model and the server
    named, and whether a key is set when neither is, since a key alone asks for the default
    model. Not the key itself, which CI does not have, nor the cache folders, which CI sets to
    its own."""
    model, server = os.environ.get("KBUILD_MODEL", ""), os.environ.get("OPENAI_BASE_URL", "")
    key = "" if model or server else str(bool(os.environ.get("OPENAI_API_KEY")))
    return xxhash.xxh3_128_hexdigest("\0".join((model, server, key)).encode())


def code_place(path: str, root: str, packages: dict[str, str]) -> str | None:
    """How the record names a code file: `kbuild.rules:knowledge.py` inside one of kbuild's
    packages (wherever it is installed: a runner installs its own), `Kbuildfile.py` from the
    root, None elsewhere (the libraries kbuild imports, which the record does not follow)."""
    best = None
    for name, folder in packages.items():
        if path.startswith(folder + os.sep) and (best is None or len(folder) > len(packages[best])):
            best = name
    if best is not None:
        return f"{best}:{os.path.relpath(path, packages[best]).replace(os.sep, '/')}"
    inner = os.path.relpath(path, root).replace(os.sep, "/")
    if not path.startswith(root + os.sep) or LIBRARIES & set(inner.split("/")):
        return None
    return inner


def code_path(place: str, root: str, packages: dict[str, str | None]) -> str | None:
    """The file a `code_place` names in this install; None when it has no such package."""
    package, colon, inner = place.partition(":")
    if not colon:
        return os.path.join(root, place)
    if package not in packages:
        packages[package] = _package_folder(package)
    folder = packages[package]
    return None if folder is None else os.path.join(folder, inner)


def _package_folder(name: str) -> str | None:
    """Where the package `name` (kbuild or one of its subpackages) is installed, found without
    running it, by the finders Python imports with (PEP 451), as importlib.util.find_spec does
    for a subpackage of a package already imported: kbuild, which has been."""
    import kbuild

    if name == "kbuild":
        return os.path.dirname(os.path.realpath(kbuild.__file__))
    if not name.startswith("kbuild.") or "." in name[len("kbuild."):]:
        return None
    for finder in sys.meta_path:
        find = getattr(finder, "find_spec", None)
        spec = find(name, kbuild.__path__) if find is not None else None
        if spec is not None:
            places = list(spec.submodule_search_locations or [])
            return os.path.realpath(places[0]) if places else None
    return None


def loaded_code(root: str, extra: list[str]) -> dict[str, str] | None:
    """The place and hash of each module loaded in this process from kbuild or from under
    `root`, and of `extra` (the Kbuildfile, the rules' prompts); None when one of `extra` is
    elsewhere, where the record could not follow it."""
    packages = loaded_packages()
    chosen = {path: place for path in loaded_modules() if (place := code_place(path, root, packages)) is not None}
    for path in map(os.path.realpath, extra):
        if (place := code_place(path, root, packages)) is None:
            return None
        chosen[path] = place
    code: dict[str, str] = {}
    for path, place in sorted(chosen.items(), key=lambda item: item[1]):
        digest = file_hash(path)
        if digest is None:
            return None
        code[place] = digest
    return code


def write(root: str, version: str, strict: bool, code: dict[str, str], folders: list[str],
          files: list[str]) -> bool:
    """Record a check that found nothing: every file under `folders` (the store, the lock's
    folder) and each of `files`, as they are now. False when a file cannot be recorded (a
    symlink, which the check would have refused, or a name with a line break); the record is
    then not written."""
    hashes = {path: file_hash(os.path.join(root, path)) for path in files}
    for folder in folders:
        found = store_files(root, folder)
        if found is None or any(found.values()):
            return False
        hashes.update((path, file_hash(os.path.join(root, path))) for path in found if path not in hashes)
        if None in (hashes[path] for path in found):
            return False
    if any("\n" in name or "\r" in name for name in [*code, *folders, *hashes]):
        return False
    lines = [HEADER, FORMAT, f"kbuild {version}", f"strict {'yes' if strict else 'no'}",
             f"environment {environment()}"]
    lines += [f"code {digest} {place}" for place, digest in sorted(code.items())]
    lines += [f"folder {folder}" for folder in folders]
    lines += [f"file {digest or '-'} {path}" for path, digest in sorted(hashes.items())]
    text = "\n".join(lines) + "\n"
    target = os.path.join(root, RECORD)
    try:
        with open(target, encoding="utf-8") as file:
            if file.read() == text:
                return True  # the same record: its file is left as it was
    except (OSError, ValueError):
        pass
    tmp = f"{target}.{os.getpid()}.tmp"  # two checks at once each write their own
    with open(tmp, "w", encoding="utf-8") as file:
        file.write(text)
    os.replace(tmp, target)
    return True


refused: tuple[str, bool] | None = None  # (root, strict) kbuild.entry has just found the record not to hold for


def holds(root: str, version: str, strict: bool) -> bool:
    """Whether the record in `root` is of a check as strict as this one, by this kbuild, of
    exactly the files there are now. False at once when `kbuild.entry` has just found it not
    to, in this process: the command line it hands over to would read every file again."""
    global refused
    if refused is not None and refused == (os.path.realpath(root), strict):
        refused = None
        return False
    return _holds(root, version, strict)


def _holds(root: str, version: str, strict: bool) -> bool:
    try:
        with open(os.path.join(root, RECORD), encoding="utf-8") as file:
            lines = file.read().split("\n")
    except (OSError, ValueError):
        return False
    allowed = ("strict yes",) if strict else ("strict yes", "strict no")  # a strict check passed passes both
    if lines[1:3] != [FORMAT, f"kbuild {version}"] or len(lines) < 5 or lines[3] not in allowed \
            or lines[4] != f"environment {environment()}":
        return False
    code: list[tuple[str, str]] = []
    folders: list[str] = []
    files: dict[str, str | None] = {}
    for line in lines[5:]:
        kind, _, rest = line.partition(" ")
        if kind == "folder":
            folders.append(rest)
            continue
        digest, _, path = rest.partition(" ")
        if kind == "code":
            code.append((path, digest))
        elif kind == "file":
            files[path] = None if digest == "-" else digest
        elif line:
            return False  # a line this kbuild does not write: conflict markers, a hand's
    packages: dict[str, str | None] = {}
    for place, digest in code:
        path = code_path(place, root, packages)
        if path is None or file_hash(path) != digest:
            return False
    for folder in folders:
        found = store_files(root, folder)
        inside = f"{folder}/"
        if found is None or any(found.values()) or found.keys() != {p for p in files if p.startswith(inside)}:
            return False
    # One thread: reading on two made the 11,297 files of 10,000 facts take 100 ms against 81
    # (scratch, in-process; the threads hand Python's lock to and fro for each file's few µs).
    return all(file_hash(os.path.join(root, path)) == digest for path, digest in files.items())
