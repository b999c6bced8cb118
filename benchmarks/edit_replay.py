"""What an update costs: model calls and tokens per real revision, against rebuilding.

    python benchmarks/edit_replay.py [--corpus ../shared/corpus] [--sizes 10 100 1000]

A simulated model answers like the offline backend but goes through the call cache and counts
a call and its tokens (prompt characters / 4) for every question a rule asks, as a paid model
would. For each PEP with revisions it replays them in order and prints, per revision: facts
re-processed (rewrites asked), model calls and tokens, against (a) a full rebuild of the store
and (b) re-processing the whole changed document (what an ingestion pipeline that re-embeds
changed files does). Then the same one-sentence edit in generated documents of 10, 100 and
1,000 chunks: its cost should not grow with the document.
"""
from __future__ import annotations

import argparse
import json
import random
import sys
import tempfile
from pathlib import Path
from typing import Any

from click.testing import CliRunner

from kbuild.cli import main as cli
from kbuild.model.offline import OfflineBackend

REPO = Path(__file__).resolve().parents[1]


class SimulatedModel(OfflineBackend):
    """Offline answers, asked as a model is asked: one cached, counted call per question."""

    name = "simulated"

    async def _ask(self, ctx: Any, task: str, prompt: str, answer: Any) -> Any:
        async def compute() -> dict[str, Any]:
            ctx.count("model calls", 1)
            ctx.count("tokens in", len(prompt) // 4)
            ctx.count(f"tokens in: {task}", len(prompt) // 4)
            value = await answer()
            ctx.count("tokens out", len(json.dumps(value)) // 4)
            return {"value": value}

        return (await ctx.call({"task": task, "prompt": prompt}, compute))["value"]

    async def read_chunk(self, ctx, span, headings, title, figures, previous, views, picks, check=None):
        return await self._ask(ctx, "reading", span + previous, lambda: super(SimulatedModel, self).read_chunk(
            ctx, span, headings, title, figures, previous, views, picks))

    async def summarise_source(self, ctx, title, summaries, check=None):
        return await self._ask(ctx, "source summary", "\n".join(summaries), lambda: super(SimulatedModel, self)
                               .summarise_source(ctx, title, summaries))

    async def abstract(self, ctx, title, summaries, check=None):
        return await self._ask(ctx, "abstract", "\n".join(summaries), lambda: super(SimulatedModel, self)
                               .abstract(ctx, title, summaries))

    async def write_section(self, ctx, kind, about, title, facts, check=None):
        prompt = kind + about + json.dumps(facts)
        return await self._ask(ctx, "view", prompt, lambda: super(SimulatedModel, self)
                               .write_section(ctx, kind, about, title, facts))

    async def ground(self, ctx, doubts):
        prompt = "".join(d.sentence + "".join(d.evidence) for d in doubts)
        return await self._ask(ctx, "grounding", prompt, lambda: super(SimulatedModel, self).ground(ctx, doubts))


KBUILDFILE = f"""
import sys
from pathlib import Path
sys.path.insert(0, {str(REPO / 'benchmarks')!r})
from edit_replay import SimulatedModel
from kbuild.rules import knowledge_base

kb = knowledge_base(Path(__file__).parent, backend=SimulatedModel(), floor_tokens=FLOOR, cap_tokens=CAP)
RULES = kb.rules
targets = kb.targets
"""


def store(root: Path, floor: int = 2000, cap: int = 4000) -> None:
    root.mkdir(parents=True, exist_ok=True)
    (root / "Kbuildfile.py").write_text(KBUILDFILE.replace("FLOOR", str(floor)).replace("CAP", str(cap)))
    (root / "kb" / "corpus").mkdir(parents=True, exist_ok=True)
    (root / "kb" / "corpus" / "sources.yml").write_text("sources: []\n")


def build(root: Path) -> dict[str, Any]:
    result = CliRunner().invoke(cli, ["-C", str(root), "build", "--json"])
    if result.exit_code != 0:
        raise SystemExit(result.output)
    return json.loads(result.output[result.output.index("{"):])


def add(root: Path, name: str) -> None:
    CliRunner().invoke(cli, ["-C", str(root), "add", "corpus", name])


def calls(report: dict[str, Any]) -> tuple[int, int, int]:
    c = report["counters"]
    rewrites = sum(1 for q in report["executed"] if q.startswith("reading("))
    return rewrites, int(c.get("model calls", 0)), int(c.get("tokens in", 0))


def cold_report(files: dict[str, str], floor: int = 2000, cap: int = 4000) -> dict[str, Any]:
    """The report of a cold build of a fresh store holding `files` (name -> text)."""
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        store(root, floor, cap)
        for name, text in files.items():
            (root / name).write_text(text)
            add(root, name)
        return build(root)


def cold(files: dict[str, str], floor: int = 2000, cap: int = 4000) -> tuple[int, int, int]:
    return calls(cold_report(files, floor, cap))


def replay(corpus: Path) -> list[dict[str, Any]]:
    """Per document with revisions: kbuild's model calls over its revisions, against full rebuilds
    and against re-processing the changed document each time."""
    results = []
    folders = sorted(p for p in corpus.iterdir() if p.is_dir())
    latest = {f.name: sorted(f.glob("rev-*.rst"))[0].read_text() for f in folders}
    print("revision      | facts rewritten | calls | tokens in || full rebuild calls | tokens || whole document calls | tokens")
    for folder in folders:
        revisions = sorted(folder.glob("rev-*.rst"))
        with tempfile.TemporaryDirectory() as tmp:
            root = Path(tmp)
            store(root)
            for name, text in latest.items():
                (root / f"{name}.rst").write_text(text)
                add(root, f"{name}.rst")
            build(root)
            totals = [0, 0, 0, 0]
            for rev in revisions[1:]:
                text = rev.read_text()
                (root / f"{folder.name}.rst").write_text(text)
                latest[folder.name] = text
                facts, n, tokens = calls(build(root))
                _, full_n, full_t = cold({f"{k}.rst": v for k, v in latest.items()})
                _, doc_n, doc_t = cold({f"{folder.name}.rst": text})
                totals = [totals[0] + n, totals[1] + full_n, totals[2] + doc_n, totals[3] + tokens]
                print(f"{folder.name} {rev.stem} | {facts:>15} | {n:>5} | {tokens:>9} || {full_n:>18} | {full_t:>6} || "
                      f"{doc_n:>20} | {doc_t:>6}", flush=True)
            results.append({"document": folder.name, "revisions": len(revisions) - 1, "calls": totals[0],
                            "full": totals[1], "whole": totals[2], "tokens": totals[3]})
            print(f"{folder.name}: {totals[0]} calls over {len(revisions) - 1} revisions, against {totals[1]} for full "
                  f"rebuilds ({100 * totals[0] / totals[1]:.0f}%) and {totals[2]} for re-processing each changed "
                  f"document ({100 * totals[0] / totals[2]:.0f}%)")
    return results


def flat(sizes: list[int]) -> list[tuple[int, int, int, int]]:
    """The same one-sentence edit in documents of `sizes` chunks: (chunks, facts rewritten, model
    calls, tokens in) for each."""
    rows = []
    rng = random.Random(4)
    words = "ledger account balance transfer clearing settlement audit record export merchant".split()
    print("chunks | one-sentence edit: facts rewritten | model calls | tokens in")
    for size in sizes:
        paragraphs = [" ".join(rng.choice(words) for _ in range(14)).capitalize() + ". " +
                      " ".join(rng.choice(words) for _ in range(14)).capitalize() + "." for _ in range(size * 2)]
        sections = [f"## Part {i}\n\n" + "\n\n".join(paragraphs[i * 20:(i + 1) * 20]) for i in range(len(paragraphs) // 20 + 1)]
        text = "# Manual\n\n" + "\n\n".join(s for s in sections if s.strip().count("\n") > 1) + "\n"
        with tempfile.TemporaryDirectory() as tmp:
            root = Path(tmp)
            store(root, floor=30, cap=60)
            (root / "manual.md").write_text(text)
            add(root, "manual.md")
            first = build(root)
            chunks = sum(1 for q in first["executed"] if q.startswith("rewrite("))
            middle = paragraphs[len(paragraphs) // 2]
            (root / "manual.md").write_text(text.replace(middle, middle.replace(".", " for the monthly audit.", 1)))
            facts, n, tokens = calls(build(root))
            print(f"{chunks:>6} | {facts:>34} | {n:>11} | {tokens:>9}", flush=True)
            rows.append((chunks, facts, n, tokens))
    return rows


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--corpus", type=Path, default=REPO.parent / "shared" / "corpus")
    parser.add_argument("--sizes", type=int, nargs="*", default=[10, 100, 1000])
    parser.add_argument("--no-replay", action="store_true")
    args = parser.parse_args()
    flat(args.sizes)
    if not args.no_replay:
        if not args.corpus.is_dir():
            sys.exit(f"no corpus at {args.corpus}; pass --corpus or --no-replay")
        replay(args.corpus)


if __name__ == "__main__":
    main()
