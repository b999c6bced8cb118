"""Token amplification: what a cold build sends to the model, over the tokens of its sources.

    python benchmarks/amplification.py [--corpus ../shared/corpus]

A cold build of the newest revision of each document of the corpus runs through kbuild's real
OpenAI backend against the scripted OpenAI-compatible server of the tests (tests/openai_server.py),
so every request is counted as it was sent: system prompt, template, worked example, schema,
retries, judge calls. Tokens are characters / 4 on both sides of the ratio.

Two scripted models bound the grounding cost: a faithful one whose rewrite is the chunk's own
words (code clears every sentence: the fewest grounding questions), and a paraphrasing one that
puts a word of its own into every sentence (code clears none: every sentence goes to the
grounding model with its closest source sentences, the most a rewrite can cost).
"""
from __future__ import annotations

import argparse
import json
import re
import sys
import tempfile
from collections import Counter
from pathlib import Path

from click.testing import CliRunner

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "tests"))

from model_replies import answer  # noqa: E402
from openai_server import Reply, ScriptedServer, message_text  # noqa: E402

from kbuild.cli import main as cli  # noqa: E402

TASKS = {"ChunkReading": "reading", "Grounding": "grounding", "SourceSummary": "source summary",
         "Abstract": "abstract", "Section": "view on request", "Spec": "spec", "FigureText": "figure"}


def documents(corpus: Path) -> dict[str, str]:
    """The newest revision of each document of the corpus (file name -> text)."""
    docs = {}
    for entry in sorted(corpus.iterdir()):
        if entry.is_dir() and sorted(entry.glob("rev-*.rst")):
            docs[f"{entry.name}.rst"] = sorted(entry.glob("rev-*.rst"))[-1].read_text()
        elif entry.suffix == ".rst":
            docs[entry.name] = entry.read_text()
    return docs


def paraphrasing(request: dict) -> Reply:
    """A faithful answer whose rewrite adds a word of its own to every sentence."""
    got = answer(request)
    if isinstance(got, dict) and "rewrite" in got:
        got["rewrite"] = re.sub(r"([.!?])(\s+)(?=[A-Z])", r"\1\2Indeed, ", got["rewrite"])
    return Reply(got if isinstance(got, str) else json.dumps(got))


def faithful(request: dict) -> Reply:
    got = answer(request)
    return Reply(got if isinstance(got, str) else json.dumps(got))


def sent_tokens(request: dict) -> int:
    """What a request puts before the model: the text of its messages and its response format."""
    text = "".join(message_text(m["content"]) for m in request["messages"])
    return (len(text) + len(json.dumps(request.get("response_format") or ""))) // 4


def measure(docs: dict[str, str], model=faithful) -> dict[str, int]:
    """Tokens sent per task by a cold build of `docs` ("all": in all)."""
    with tempfile.TemporaryDirectory() as tmp, ScriptedServer(model, string_bounds=True) as server:
        root = Path(tmp)
        settings = {"base_url": f"{server.url}/v1", "api_key": "bench", "model": "scripted"}
        (root / "Kbuildfile.py").write_text(
            "from pathlib import Path\nfrom kbuild.rules import knowledge_base\n"
            f"kb = knowledge_base(Path(__file__).parent, model={settings!r})\n"
            "RULES = kb.rules\ntargets = kb.targets\nmax_calls = 8\n")
        (root / "kb/corpus").mkdir(parents=True)
        lines = ["sources:"]
        for name, text in docs.items():
            (root / name).write_text(text)
            lines += [f"  - id: {Path(name).stem}", f"    path: {name}"]
        (root / "kb/corpus/sources.yml").write_text("\n".join(lines) + "\n")
        result = CliRunner().invoke(cli, ["-C", str(root), "build", "--json"])
        report = json.loads(result.output[result.output.index("{"):])
        tokens: Counter[str] = Counter()
        for request in server.requests:
            name = (request.get("response_format") or {}).get("json_schema", {}).get("name")
            tokens[TASKS.get(name, "meaning judge" if name is None else name)] += sent_tokens(request)
        tokens["all"] = sum(tokens.values())
        counters = report["counters"]
        return {**tokens, "pages failed": len(report["failed"]),
                "sentences asked": int(counters.get("grounding: sentences asked", 0)),
                "sentences cleared": int(counters.get("grounding: sentences cleared by code", 0))}


def ratios(corpus: Path) -> tuple[int, dict[str, dict[str, int]]]:
    """The corpus's source tokens, and the tokens each scripted model's cold build sends per task."""
    docs = documents(corpus)
    source_tokens = sum(len(t) for t in docs.values()) // 4
    return source_tokens, {"faithful": measure(docs, faithful), "paraphrasing": measure(docs, paraphrasing)}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--corpus", type=Path, default=REPO.parent / "shared" / "corpus")
    args = parser.parse_args()
    if not args.corpus.is_dir():
        sys.exit(f"no corpus at {args.corpus}; pass --corpus")
    source_tokens, by_model = ratios(args.corpus)
    print(f"{source_tokens:,} source tokens")
    for model, tokens in by_model.items():
        print(f"{model} model:")
        counts = {k: tokens.pop(k) for k in ("pages failed", "sentences asked", "sentences cleared")}
        for task, n in sorted(tokens.items(), key=lambda kv: (kv[0] == "all", kv[0])):
            print(f"  {task:<16} {n:>9,} tokens sent  {n / source_tokens:5.2f}x")
        print("  " + ", ".join(f"{k}: {v:,}" for k, v in counts.items()))


if __name__ == "__main__":
    main()
