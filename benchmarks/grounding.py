"""Does targeted grounding catch what blanket grounding caught? On a labelled set of rewrites.

    python benchmarks/grounding.py                       # code's triage, and both checks with a scripted judge
    python benchmarks/grounding.py --server URL --limit 10   # both checks with a real model server (llama.cpp)

tests/data/grounding-probes.json holds real passages of the PEPs, each with a clean rewrite and
rewrites with one planted unsupported sentence (a changed number, a flipped keyword, an invented
limit, a changed name, an invented claim, a reversed paraphrase).

- blanket (the design before): one question per rewrite, every sentence of it against the whole
  passage;
- targeted (kbuild now): code refuses what it can, clears what it can, and asks only about the
  rest, each sentence with its closest source sentences.

Both ask through kbuild's real OpenAI backend. The scripted judge is an oracle that names exactly
the planted sentences it is shown: with it, blanket grounding catches everything and the figure
that matters is how many planted sentences targeted grounding lets reach the judge at all. With
a real server both depend on the model.
"""
from __future__ import annotations

import argparse
import asyncio
import json
import re
import sys
import tempfile
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "tests"))

from openai_server import Reply, ScriptedServer, message_text  # noqa: E402

from kbuild.checks.grounding import Doubt, sentences_of, triage  # noqa: E402
from kbuild.model.openai_backend import OpenAIBackend  # noqa: E402
from kbuild.model.settings import ModelSettings  # noqa: E402

PROBES = REPO / "tests/data/grounding-probes.json"


def norm(text: str) -> str:
    return " ".join(re.findall(r"\w+", text.lower()))


class Ctx:
    """What the backend needs of a rule's context, for asking outside a build."""

    query_id = "benchmark"

    def __init__(self, state_dir: Path) -> None:
        self.state_dir = state_dir
        self.counters: dict[str, float] = {}

    async def call(self, request: dict[str, Any], compute: Any) -> Any:
        return await compute()

    def count(self, name: str, amount: float) -> None:
        self.counters[name] = self.counters.get(name, 0) + amount

    def warn(self, message: str) -> None:
        print(f"warning: {message}", file=sys.stderr)


def oracle(planted: set[str]) -> Any:
    """A judge that names every statement it is shown whose words are a planted sentence's."""
    def reply(request: dict) -> Reply:
        asked = message_text(request["messages"][-1]["content"])
        statements = re.findall(r"^\[(\d+)\] (.+?)(?: \(closest: [^)]*\))?$", asked, re.M)
        return Reply(json.dumps({"unsupported": [int(n) for n, s in statements if norm(s) in planted]}))
    return reply


async def check(backend: OpenAIBackend, ctx: Ctx, text: str, original: str, framing: str,
                targeted: bool) -> tuple[set[str], int]:
    """The sentences found unsupported, and how many sentences went to the model."""
    if targeted:
        t = triage(text, [original], framing)
        doubts = list(t.doubts)
        found = {norm(s) for s, _ in t.refused}
    else:
        doubts = [Doubt(s, tuple(sentences_of(original)), "blanket") for s in sentences_of(text)]
        found = set()
    for n in await backend.ground(ctx, doubts) if doubts else []:
        found.add(norm(doubts[n].sentence))
    await backend.client().close()
    return found, len(doubts)


def run(server_url: str | None, limit: int | None) -> dict[str, dict[str, int]]:
    probes = json.loads(PROBES.read_text())["probes"][:limit]
    results: dict[str, dict[str, int]] = {}
    with tempfile.TemporaryDirectory() as tmp:
        for method in ("blanket", "targeted"):
            caught = planted = asked = sentences = false = clean_sentences = 0
            for probe in probes:
                framing = "PEP " + re.search(r"pep-0*(\d+)", probe["source"]).group(1)
                for rewrite in probe["rewrites"]:
                    marks = {norm(u) for u in rewrite["unsupported"]}
                    scripted = None if server_url else ScriptedServer(oracle(marks), string_bounds=True)
                    url = server_url or f"{scripted.url}/v1"
                    backend = OpenAIBackend(ModelSettings(base_url=url, api_key="bench", model="judge",
                                                          timeout=900, max_retries=1).resolved())
                    try:
                        found, n = asyncio.run(check(backend, Ctx(Path(tmp)), rewrite["text"], probe["original"],
                                                     framing, method == "targeted"))
                    finally:
                        if scripted:
                            scripted.close()
                    asked += n
                    sentences += len(sentences_of(rewrite["text"]))
                    planted += len(marks)
                    caught += sum(any(m[:60] in f or f[:60] in m for f in found) for m in marks)
                    if rewrite["label"] == "clean":
                        false += len(found)
                        clean_sentences += len(sentences_of(rewrite["text"]))
            results[method] = {"planted": planted, "caught": caught, "asked": asked, "sentences": sentences,
                               "clean flagged": false, "clean sentences": clean_sentences}
    return results


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--server", help="an OpenAI-compatible base URL (e.g. http://127.0.0.1:8080/v1)")
    parser.add_argument("--limit", type=int, help="only the first N passages")
    args = parser.parse_args()
    for method, r in run(args.server, args.limit).items():
        print(f"{method:<9} caught {r['caught']}/{r['planted']} planted sentences; asked the model about "
              f"{r['asked']}/{r['sentences']} sentences; flagged {r['clean flagged']}/{r['clean sentences']} "
              "sentences of clean rewrites")


if __name__ == "__main__":
    main()
