"""Views on request on labelled requests: precision and recall of their statements.

    python benchmarks/views.py
    python benchmarks/views.py specs

Builds a store of the PEPs in tests/data with the offline backend, one view on request per
labelled request of tests/data/view-requests.json (how the labels were made: tests/data/README.md),
and compares each view's statements with the sentences labelled as belonging in it. A request
labelled as a gap must give the gap page.

`specs` builds a store of the OWASP cheat sheets in tests/data/owasp (guides that write their
rules in plain English, no keyword in capitals), a view on each sheet's subject and a spec from
each view, and prints how many statements each view holds, how many requirements its spec, and
which reading of the keywords it took (kbuild/text/obligations.py).
"""
from __future__ import annotations

import json
import re
import shutil
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path

from click.testing import CliRunner

from kbuild.cli import main as kbuild_main

DATA = Path(__file__).resolve().parents[1] / "tests" / "data"
REQUESTS = DATA / "view-requests.json"
PROJECT = "peps"
CITES = re.compile(r"(?:\s+\(\[[^\]]*\]\([^)]*\)\))+$")
WORD = re.compile(r"\w+")


@dataclass(frozen=True)
class Scored:
    name: str
    statements: int
    labelled: int
    right: int  # statements that are labelled sentences
    found: int  # labelled sentences the view states

    @property
    def precision(self) -> float:
        return self.right / self.statements if self.statements else 1.0

    @property
    def recall(self) -> float:
        return self.found / self.labelled if self.labelled else 1.0


@dataclass(frozen=True)
class Results:
    requests: list[Scored]
    gaps: dict[str, bool]  # request name: whether it gave the gap page

    @property
    def precision(self) -> float:
        statements = sum(s.statements for s in self.requests)
        return sum(s.right for s in self.requests) / statements if statements else 1.0

    @property
    def recall(self) -> float:
        return sum(s.found for s in self.requests) / sum(s.labelled for s in self.requests)


def _words(text: str) -> str:
    return " ".join(WORD.findall(text.lower()))


def matches(statement: str, label: str) -> bool:
    """A statement is a labelled sentence when its words begin with the label's words."""
    return _words(statement).startswith(_words(label))


def statements(page: str) -> list[str]:
    return [CITES.sub("", line[2:]) for line in page.splitlines() if line.startswith("- ")]


def run_kbuild(root: Path, *args: str) -> str:
    """kbuild's output in `root`; a command other than a build that fails ends the benchmark (a
    build may fail a page and still write what is measured)."""
    result = CliRunner().invoke(kbuild_main, ["-C", str(root), *args])
    if result.exit_code != 0 and args[0] != "build":
        raise SystemExit(f"kbuild {' '.join(args)} failed: {result.output.strip()}")
    return result.output


def build(root: Path, labelled: dict) -> None:
    """A store of the labelled sources with one view on request per request, built offline."""
    def kbuild(*args: str) -> str:
        return run_kbuild(root, *args)

    kbuild("init", str(root))
    for name, path in labelled["sources"].items():
        shutil.copy(DATA / path, root / name)
        kbuild("add", PROJECT, name)
    for request in [*labelled["requests"], *labelled["gaps"]]:
        kbuild("view", "add", PROJECT, request["name"], "--about", request["about"])
    # a fact page may fail its own checks; the views on request do not read fact pages, and must be there
    output = kbuild("build")
    views = root / "kb" / PROJECT / "artifacts" / "views"
    missing = [r["name"] for r in [*labelled["requests"], *labelled["gaps"]]
               if not (views / f"{r['name']}.md").exists()]
    if missing:
        raise SystemExit(f"views {', '.join(missing)} were not built: {output.strip()}")


def evaluate(root: Path, labelled: dict) -> Results:
    views = root / "kb" / PROJECT / "artifacts" / "views"
    scored = []
    for request in labelled["requests"]:
        said = statements((views / f"{request['name']}.md").read_text())
        labels = request["sentences"]
        scored.append(Scored(request["name"], len(said), len(labels),
                             sum(any(matches(s, label) for label in labels) for s in said),
                             sum(any(matches(s, label) for s in said) for label in labels)))
    gaps = {g["name"]: "**A gap.**" in (views / f"{g['name']}.md").read_text() for g in labelled["gaps"]}
    return Results(scored, gaps)


def run() -> Results:
    labelled = json.loads(REQUESTS.read_text())
    with tempfile.TemporaryDirectory() as tmp:
        build(Path(tmp), labelled)
        return evaluate(Path(tmp), labelled)


def main() -> None:
    labelled = json.loads(REQUESTS.read_text())
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        build(root, labelled)
        results = evaluate(root, labelled)
        verbose = "-v" in sys.argv
        print("| request | statements | labelled | precision | recall |\n|---|---|---|---|---|")
        for s, request in zip(results.requests, labelled["requests"]):
            print(f"| {request['about']} | {s.statements} | {s.labelled} | {s.precision:.2f} | {s.recall:.2f} |")
        print(f"| **all {len(results.requests)} requests** | {sum(s.statements for s in results.requests)} | "
              f"{sum(s.labelled for s in results.requests)} | **{results.precision:.2f}** | **{results.recall:.2f}** |")
        print(f"gaps: {sum(results.gaps.values())} of {len(results.gaps)} requests with nothing on topic "
              "gave the gap page")
        if verbose:
            views = root / "kb" / PROJECT / "artifacts" / "views"
            for request in labelled["requests"]:
                said = statements((views / f"{request['name']}.md").read_text())
                for s in said:
                    if not any(matches(s, label) for label in request["sentences"]):
                        print(f"  {request['name']}: extra: {s[:150]}")
                for label in request["sentences"]:
                    if not any(matches(s, label) for s in said):
                        print(f"  {request['name']}: missed: {label[:150]}")
            for name, gap in results.gaps.items():
                if not gap:
                    print(f"  {name}: not a gap: {statements((views / f'{name}.md').read_text())[:3]}")


def specs() -> None:
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)

        def kbuild(*args: str) -> str:
            return run_kbuild(root, *args)

        kbuild("init", str(root))
        sheets = sorted((DATA / "owasp").glob("*_Cheat_Sheet.md"))
        for sheet in sheets:
            shutil.copy(sheet, root / sheet.name)
            kbuild("add", "owasp", sheet.name)
        names = {}
        for sheet in sheets:
            name = sheet.name.removesuffix("_Cheat_Sheet.md").lower().replace("_", "-")
            names[name] = sheet.name.removesuffix("_Cheat_Sheet.md").replace("_", " ")
            kbuild("view", "add", "owasp", name, "--about", names[name])
            kbuild("spec", "add", "owasp", f"{name}-spec", "--view", name)
        kbuild("build")
        artifacts = root / "kb" / "owasp" / "artifacts"
        print("| view on | statements | requirements | keywords read |\n|---|---:|---:|---|")
        total = [0, 0]
        for name, about in names.items():
            said = statements((artifacts / "views" / f"{name}.md").read_text())
            spec = (artifacts / "specs" / f"{name}-spec.md").read_text()
            found = re.findall(r"^\*\*R\d+\.\*\* ", spec, flags=re.MULTILINE)
            reading = "capitals" if any(re.search(r"\b(?:MUST|SHALL|SHOULD)\b", s) for s in said) else "plain English"
            total = [total[0] + len(said), total[1] + len(found)]
            print(f"| {about} | {len(said)} | {len(found)} | {reading} |")
        print(f"| **all {len(names)}** | {total[0]} | {total[1]} | |")


if __name__ == "__main__":
    specs() if sys.argv[1:] == ["specs"] else main()
