"""Whole commands as a user feels them: `kbuild` no-op, `kbuild check` on a fresh clone,
`kbuild status`, `--help` and `--version`, against `git status` and ninja on the same tree.

    python benchmarks/commands.py [--facts 130 1040 4940] [--runs 7] [--against OTHER_PYTHON]

Each store is built (offline backend) from real documents, the revisions of PEP 747 in
tests/data/pep-0747 (copied under new names until the store holds about --facts facts), and
committed to a git repository with the kbuild.checked that `kbuild check --record` wrote
(a fresh clone's check is timed without it, then with it). ninja (`pip install ninja`) gets an equivalent `build.ninja`
generated from kbuild.lock: one edge per query, from the files it reads and the outputs (or
stamps) of the queries it reads, to its outputs (or a stamp). Every figure is the median of
--runs whole processes, the commands interleaved so a busy machine slows them alike; ratios are
within one run. "after a pull" is `kbuild` right after `git merge` brings a teammate's commit
that changed one source and its pages and lock (the merge itself not timed; the store is then
put back and built untimed for the next run). --against times every kbuild command of the
row a second time with another Python's kbuild (another install: before a change, say),
interleaved with the first, as a row of its own; each kbuild on a copy of the store it built
itself, with its own teammate's commit and its own fresh clone.
"""
from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

# Installed kbuild runs from compiled bytecode (pip compiles it at install); this machine's
# environment turns bytecode caching off, which would add about a second to every process.
os.environ.pop("PYTHONDONTWRITEBYTECODE", None)

DOCUMENTS = Path(__file__).resolve().parents[1] / "tests" / "data" / "pep-0747"
KBUILD = [sys.executable, "-m", "kbuild"]
FACTS_PER_DOCUMENT = 17  # a revision of PEP 747 cut at floor 300, cap 600 tokens


def run(cmd: list[str], cwd: Path, ok: tuple[int, ...] = (0,)) -> float:
    t0 = time.perf_counter()
    result = subprocess.run(cmd, cwd=cwd, capture_output=True, text=True)
    elapsed = time.perf_counter() - t0
    if result.returncode not in ok:
        raise RuntimeError(f"{' '.join(cmd)} exited {result.returncode}: {(result.stdout + result.stderr)[-1500:]}")
    return elapsed


def make_store(root: Path, facts: int) -> int:
    run([*KBUILD, "init", "."], root)
    kbuildfile = root / "Kbuildfile.py"
    kbuildfile.write_text(kbuildfile.read_text().replace("floor_tokens=2000, cap_tokens=4000",
                                                         "floor_tokens=300, cap_tokens=600"))
    revisions = sorted(DOCUMENTS.glob("*.rst"))
    (root / "docs").mkdir()
    for n in range(max(1, round(facts / FACTS_PER_DOCUMENT))):
        name = f"docs/pep-0747-{n:04d}.rst"
        shutil.copy(revisions[n % len(revisions)], root / name)
    # one sources.yml written at once: `kbuild add` per document would dominate the setup
    entries = "".join(f"  - id: pep-0747-{n:04d}\n    path: docs/pep-0747-{n:04d}.rst\n"
                      for n in range(max(1, round(facts / FACTS_PER_DOCUMENT))))
    (root / "kb/standards").mkdir(parents=True)
    (root / "kb/standards/sources.yml").write_text(f"title: Standards\nsources:\n{entries}")
    run(KBUILD, root)
    # the revisions of one PEP disagree with each other by nature: accepted, so that the check
    # passes and `kbuild check --record` writes kbuild.checked
    answer = subprocess.run([*KBUILD, "check", "--json"], cwd=root, capture_output=True, text=True, check=False)
    pairs = sorted({p["cause"] for p in json.loads(answer.stdout)["problems"] if p["kind"] == "contradiction"})
    if pairs:
        accepted = "".join(f"  - facts: [{', '.join(pair.split(' <> '))}]\n    reason: revisions of one PEP\n"
                           for pair in pairs)
        (root / "kb/standards/sources.yml").write_text(
            f"title: Standards\nsources:\n{entries}accepted_disagreements:\n{accepted}")
        run(KBUILD, root)
    built = sum(1 for p in (root / "kb").rglob("*.md") if p.read_text(errors="replace").startswith("Source: "))
    for cmd in (["git", "init", "-q"], ["git", "add", "-A"],
                ["git", "-c", "user.name=b", "-c", "user.email=b@b", "commit", "-qm", "store"]):
        subprocess.run(cmd, cwd=root, check=True)
    return built


def write_ninja(root: Path) -> Path:
    """An equivalent build.ninja: the lock's graph, one edge per query, in a folder of its own."""
    lock = json.loads((root / "kbuild.lock").read_text())["queries"]
    folder = root.parent / (root.name + "-ninja")
    folder.mkdir()
    stamps = {qid: f"stamps/{n}" for n, qid in enumerate(lock)}

    def node(qid: str) -> list[str]:
        outputs = lock[qid]["outputs"]
        return [f"../{root.name}/{p}" for p in outputs] if outputs else [stamps[qid]]

    def esc(path: str) -> str:
        return path.replace("$", "$$").replace(" ", "$ ").replace(":", "$:")

    lines = ["rule touch", "  command = touch $out", ""]
    for qid, entry in lock.items():
        inputs = []
        for group in entry["deps"]:
            for dep, _ in group:
                inputs += [f"../{root.name}/{dep[5:]}"] if dep.startswith("file:") else node(dep) if dep in lock else []
        lines.append(f"build {' '.join(map(esc, node(qid)))}: touch {' '.join(map(esc, dict.fromkeys(inputs)))}")
    (folder / "stamps").mkdir()
    (folder / "build.ninja").write_text("\n".join(lines) + "\n")
    run(["ninja", "-d", "keepdepfile"], folder)  # the first build stamps; outputs exist already
    run(["ninja"], folder)
    return folder


def git(cwd: Path, *args: str) -> str:
    return subprocess.run(["git", "-c", "user.name=b", "-c", "user.email=b@b", *args], cwd=cwd, check=True,
                          capture_output=True, text=True).stdout.strip()


def teammate_commit(root: Path, team: Path, kbuild: list[str]) -> str:
    """A teammate's commit on `root`: one source edited, the store built again by `kbuild`; its id."""
    git(team.parent, "clone", "-q", str(root), str(team))
    run(kbuild, team)  # a fresh clone takes the lock in
    doc = sorted((team / "docs").glob("*.rst"))[0]
    doc.write_text(doc.read_text() + "\n\nA paragraph a teammate added, which says one more thing.\n")
    run(kbuild, team)
    git(team, "commit", "-qam", "one source edited")
    return git(team, "rev-parse", "HEAD")


def measure(facts: int, runs: int, against: str | None = None) -> list[dict[str, float]]:
    """A row of medians per kbuild measured: this Python's, then `against`'s."""
    pythons = {"": sys.executable, **({"against": against} if against else {})}
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp) / "store"
        root.mkdir()
        built = make_store(root, facts)
        ninja = None
        if shutil.which("ninja"):  # over a copy of the tree: its `touch` must not change kbuild's files
            shutil.copytree(root, Path(tmp) / "tree", symlinks=True)
            ninja = write_ninja(Path(tmp) / "tree")
        kbuilds = {label: [python, "-m", "kbuild"] for label, python in pythons.items()}
        # Each kbuild has its own copy of the store as it built it, committed, with its own
        # teammate's commit and its own fresh clone: one's state is not the other's, and another
        # install's rules may differ (their code is in the fingerprints), so that a store one
        # built is stale to the other.
        stores = {label: Path(tmp) / f"store{label}" for label in pythons}
        clones = {label: Path(tmp) / f"clone{label}" for label in pythons}
        bases, teams = {}, {}
        for store in stores.values():
            if store != root:
                shutil.copytree(root, store, symlinks=True)
        for label, store in stores.items():
            run(kbuilds[label], store)
            run([*kbuilds[label], "check", "--record"], store, (0, 2))  # 2: a kbuild without --record
            git(store, "add", "-A")
            git(store, "commit", "-q", "--allow-empty", "-m", "built by this kbuild")
            bases[label] = git(store, "rev-parse", "HEAD")
            git(store.parent, "clone", "-q", str(store), str(clones[label]))
            teams[label] = teammate_commit(store, Path(tmp) / f"team{label}", kbuilds[label])
            git(store, "remote", "add", "team", str(Path(tmp) / f"team{label}"))
            git(store, "fetch", "-q", "team")
        time.sleep(2.1)  # past the stat cache's racy window, then settled
        for label, store in stores.items():
            run(kbuilds[label], store)
            run(kbuilds[label], store)
        peers: dict[str, tuple[list[str], Path, tuple[int, ...]]] = {
            "git status": (["git", "status", "--porcelain"], root, (0,)),
        }
        if ninja:
            peers["ninja no-op"] = (["ninja"], ninja, (0,))
        times: dict[str, list[float]] = {}

        def timed(name: str, cmd: list[str], cwd: Path, ok: tuple[int, ...] = (0,)) -> None:
            times.setdefault(name, []).append(run(cmd, cwd, ok))

        for _ in range(runs):
            for name, (cmd, cwd, ok) in peers.items():
                timed(name, cmd, cwd, ok)
            for label, kb in kbuilds.items():
                store = stores[label]
                timed(label + "kbuild no-op", kb, store)
                timed(label + "kbuild status", [*kb, "status"], store, (0, 1))
                timed(label + "kbuild --help", [*kb, "--help"], store)
                timed(label + "kbuild --version", [*kb, "--version"], store, (0, 2))
                clone = clones[label]
                shutil.rmtree(clone / ".kbuild", ignore_errors=True)  # as on a CI runner: no state, no cache
                recorded = clone / "kbuild.checked"
                if recorded.exists():  # the whole check first, then the one the record answers
                    recorded.rename(clone / "aside")
                    timed(label + "kbuild check (fresh clone)", [*kb, "check"], clone)
                    (clone / "aside").rename(recorded)
                    timed(label + "kbuild check (recorded)", [*kb, "check"], clone)
                else:
                    timed(label + "kbuild check (fresh clone)", [*kb, "check"], clone)
                git(store, "merge", "-q", "--ff-only", teams[label])
                timed(label + "kbuild after a pull", kb, store)
                git(store, "reset", "-q", "--hard", bases[label])
                run(kb, store)  # built back, untimed
            time.sleep(2.1)  # past the stat cache's racy window, then settled
            for label, kb in kbuilds.items():
                run(kb, stores[label])
        medians = {name: statistics.median(t) for name, t in times.items()}
        rows = []
        for label, python in pythons.items():
            row = {"facts": built, "python": python, **{k: v for k, v in medians.items() if k in peers}}
            row.update({k[len(label):]: v for k, v in medians.items() if k.startswith(label) and k not in peers
                        and (label or not k.startswith("against"))})
            rows.append(row)
        return rows


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--facts", type=int, nargs="+", default=[130, 1040, 4940])
    parser.add_argument("--runs", type=int, default=7)
    parser.add_argument("--against", metavar="PYTHON", help="also time the kbuild of this Python, interleaved")
    args = parser.parse_args()
    print("| store | `kbuild` no-op | `git status` | ninja no-op | `kbuild check` (fresh clone) "
          "| with `kbuild.checked` | `kbuild status` | `kbuild` after a pull | `--help` | `--version` |")
    print("|---|---|---|---|---|---|---|---|---|---|")
    for facts in args.facts:
        for r in measure(facts, args.runs, args.against):
            git_s = r["git status"]

            def cell(name: str, r: dict[str, float] = r, git_s: float = git_s) -> str:
                return f"{r[name]:.3f} s ({r[name] / git_s:.0f}×)" if name in r else "n/a"

            status = f"{cell('kbuild status')}, {r['kbuild status'] / r['kbuild no-op']:.1f}× the no-op"
            who = f" ({r['python']})" if args.against else ""
            print(f"| {r['facts']:,} facts{who} | {cell('kbuild no-op')} | {git_s:.3f} s | {cell('ninja no-op')} "
                  f"| {cell('kbuild check (fresh clone)')} | {cell('kbuild check (recorded)')} | {status} | {cell('kbuild after a pull')} "
                  f"| {r['kbuild --help']:.3f} s | {r['kbuild --version']:.3f} s |", flush=True)


if __name__ == "__main__":
    main()
