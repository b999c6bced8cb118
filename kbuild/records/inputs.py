"""What the records of "nothing changed" are taken of (kbuild.records.uptodate for a build,
kbuild.records.checked for a check): the files under a folder, and the code this process loaded
from kbuild and from the project. One walk and one list for both, so that they see the same
files. Like the records, it imports nothing beyond what Python starts with."""
from __future__ import annotations

import os
import sys


def store_files(root: str, folder: str, partial: bool = False) -> dict[str, bool] | None:
    """Every regular file and symlink under `folder` (from `root`; "" for the root itself), path
    from the root -> whether it is a symlink; symlinked folders are not entered. None when a
    folder cannot be listed, unless `partial`: then what can be. os.scandir on strings, not
    Path.rglob (part of a fresh clone's check going from 1.27 s to 0.99 s at 4,132 facts,
    `python benchmarks/commands.py --facts 4940`)."""
    found: dict[str, bool] = {}
    stack = [folder]
    while stack:
        rel = stack.pop()
        try:
            entries = list(os.scandir(os.path.join(root, rel)))
        except FileNotFoundError:
            continue
        except OSError:
            if partial:
                continue
            return None
        for entry in entries:
            path = f"{rel}/{entry.name}" if rel else entry.name
            if entry.is_symlink():
                found[path] = True
            elif entry.is_dir(follow_symlinks=False):
                stack.append(path)
            elif entry.is_file(follow_symlinks=False):
                found[path] = False
    return found


def loaded_modules() -> set[str]:
    """The real path of every Python file loaded as a module in this process. Each folder is
    resolved once, not each of the hundreds of modules' paths (Path.resolve walks every
    component of each); a file that is itself a symlink is still resolved whole."""
    folders: dict[str, str] = {}
    paths = set()
    for module in list(sys.modules.values()):
        if (file := getattr(module, "__file__", None)) and file.endswith(".py"):
            folder, name = os.path.split(file)
            if folder not in folders:
                folders[folder] = os.path.realpath(folder)
            paths.add(os.path.realpath(file) if os.path.islink(file) else os.path.join(folders[folder], name))
    return paths


def loaded_packages() -> dict[str, str]:
    """kbuild and its subpackages loaded in this process -> their folders. Not a subpackage's
    own subpackages: their files are named from the folder of the one they are in."""
    return {name: os.path.realpath(os.path.dirname(module.__file__)) for name, module in list(sys.modules.items())
            if (name == "kbuild" or (name.startswith("kbuild.") and name.count(".") == 1))
            and getattr(module, "__path__", None) and getattr(module, "__file__", None)}


def inside(path: str, folder: str) -> bool:
    return path == folder or path.startswith(folder.rstrip(os.sep) + os.sep)
