"""Recall of `kbuild context` on the golden set once a source of the project fails (issue 49).

    python benchmarks/failure_recall.py

Builds the four PEPs of tests/data and a fifth source, then puts a NUL byte into the fifth (its
conversion fails from then on) and inserts 12 lines into PEP 8 above its introduction, and
prints `kbuild eval`'s table after the clean build and after the edit. A project whose pages
above a failure stop updating serves the old line numbers of PEP 8's sections: recall falls.
Runs the kbuild of the Python that runs it (offline backend).
"""
from __future__ import annotations

import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

DATA = Path(__file__).resolve().parent.parent / "tests/data"
SOURCES = {"pep-0008.rst": DATA / "corpus/pep-0008.rst", "pep-0020.rst": DATA / "corpus/pep-0020.rst",
           "pep-0810.rst": DATA / "corpus/pep-0810.rst", "pep-0747.rst": DATA / "pep-0747/rev-11.rst"}
FILLER = "".join(f"Filler paragraph {n} says nothing.\n\n" for n in range(6))  # 12 lines


def kbuild(root: Path, *args: str) -> str:
    done = subprocess.run([sys.executable, "-m", "kbuild", "-C", str(root), *args], capture_output=True, text=True)
    return done.stdout


def recall(root: Path) -> list[str]:
    table = kbuild(root, "eval", str(DATA / "retrieval-questions.json"), "--no-misses")
    return [line for line in table.splitlines() if line.startswith("|")]


def main() -> None:
    with tempfile.TemporaryDirectory() as folder:
        root = Path(folder)
        kbuild(root, "init", str(root))
        for name, path in SOURCES.items():
            shutil.copy(path, root / name)
        (root / "door.md").write_text("# Door\n\nThe door SHALL lock at night.\n")
        for name in [*SOURCES, "door.md"]:
            kbuild(root, "add", "peps", name)
        kbuild(root)
        print("Clean build:", *recall(root), sep="\n")
        (root / "door.md").write_bytes(b"# Door\n\nThe door \0SHALL lock at night.\n")
        kbuild(root)
        pep = root / "pep-0008.rst"
        text = pep.read_text()
        at = text.index("\nIntroduction\n")
        pep.write_text(text[:at] + "\n" + FILLER + text[at:])
        kbuild(root)
        print("\nAfter door.md failed and 12 lines were inserted into PEP 8:", *recall(root), sep="\n")


if __name__ == "__main__":
    main()
