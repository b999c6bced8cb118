"""A real local model on real documents: llama.cpp's server with Gemma 3 270M, at kbuild's
default settings, over a few documents of ../shared/corpus-wild.

    python benchmarks/llama_wild.py                      # two OWASP cheat sheets and the markitdown README
    python benchmarks/llama_wild.py --documents owasp/AJAX_Security_Cheat_Sheet.md --slots 2
    python benchmarks/llama_wild.py --kbuild "PYTHONPATH=/tmp/before python -m kbuild"   # another kbuild

The server runs as tests/test_llama.py starts it (one slot, two threads; tests/llamacpp.py),
with a context of 16,384 tokens per slot.
One cold build of one project of the documents, with the model named and every other setting at
its default (timeout, max_retries, validation_retries, max_calls), as a new user would run it.
Reported: wall time; readings a minute (chunks read by the model into a fact, and replies to
reading requests whether they fit or not: what the server got through); failed queries,
the causes split into transport failures (the server timed out, was unreachable, refused, or
answered what is not JSON: what issue 49's item 9 is about; the aim is none) and page failures
(replies that never fit their schema or passed kbuild's checks, by the last reason: cut at
max_tokens, the HTML and link guards of issue 49's other items, other checks); queries not built
because of them; tokens sent (the server's own count of prompt
tokens, every call and retry) against the documents' tokens (the same tokenizer, /tokenize);
and tasks the server cancelled because kbuild gave up on them (a timeout; the aim is none).

The model is the base model, not instruction-tuned: its replies are well-formed (the schemas
are grammars) but poor, so page failures say little about kbuild; its speed on these shared
machines varies several-fold from run to run.
"""
from __future__ import annotations

import argparse
import json
import os
import re
import shlex
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "tests"))

import llamacpp  # noqa: E402

CORPUS = REPO.parent / "shared" / "corpus-wild"
DOCUMENTS = ["owasp/AJAX_Security_Cheat_Sheet.md", "owasp/DOM_Clobbering_Prevention_Cheat_Sheet.md",
             "readmes/markitdown.md"]
# what kbuild/model/transport.py says when a call could not travel (not a reply that failed its checks)
TRANSPORT = re.compile(r"the model server (sent nothing|did not answer|refused the request|kept refusing|failed with)"
                       r"|cannot reach the model server|reply was not valid JSON")
# why a page failed, for the rest: the last reason a reply was refused for
PAGE_CAUSES = [("reply cut at max_tokens", re.compile(r"cut at max_tokens")),
               ("HTML, links or scripts (page guards)", re.compile(r"link, HTML or a script|HTML or a script|raw HTML")),
               ("other checks of the reply", re.compile(r"."))]
DEPENDENT = re.compile(r"^needs \w+\(.*\), which (failed|waits)$")  # a query it reads failed (kbuild/engine/execute.py)


def build(documents: list[Path], server: llamacpp.LlamaServer, kbuild: list[str], env: dict[str, str]) -> dict:
    """One cold build of a project of `documents` through `server`: its report and wall time."""
    with tempfile.TemporaryDirectory(prefix="llama-wild-") as tmp:
        root = Path(tmp)
        settings = {"base_url": f"{server.url}/v1", "api_key": "none", "model": "gemma3-270m"}
        (root / "Kbuildfile.py").write_text(
            "from pathlib import Path\nfrom kbuild.rules import knowledge_base\n"
            f"kb = knowledge_base(Path(__file__).parent, model={settings!r})\n"
            "RULES = kb.rules\ntargets = kb.targets\nbefore_build = kb.before_build\n")
        lines = ["sources:"]
        for path in documents:
            shutil.copy(path, root / path.name)
            lines += [f"  - id: {re.sub(r'[^a-z0-9]+', '-', path.stem.lower()).strip('-')}", f"    path: {path.name}"]
        (root / "kb/wild").mkdir(parents=True)
        (root / "kb/wild/sources.yml").write_text("\n".join(lines) + "\n")
        started = time.perf_counter()
        done = subprocess.run([*kbuild, "-C", str(root), "build", "--json"], capture_output=True, text=True, env=env)
        wall = time.perf_counter() - started
        if "{" not in done.stdout:
            sys.exit(f"kbuild build printed no report (exit {done.returncode}):\n{done.stdout[-3000:]}{done.stderr[-3000:]}")
        report = json.loads(done.stdout[done.stdout.index("{"):done.stdout.rindex("}") + 1])
        logs = subprocess.run([*kbuild, "-C", str(root), "logs", "-n", "100000", "--json"], capture_output=True,
                              text=True, env=env)
        calls = [json.loads(line) for line in logs.stdout.splitlines() if line.startswith("{")]
        return {"report": report, "wall": wall, "calls": calls, "exit": done.returncode}


def summarise(run: dict, source_tokens: int, cancelled: int) -> dict[str, object]:
    report, calls = run["report"], run["calls"]
    failed: dict[str, str] = report["failed"]
    causes = {q: m for q, m in failed.items() if not DEPENDENT.match(m)}
    transport = {q: m for q, m in causes.items() if TRANSPORT.search(m)}
    readings = [q for q in report["executed"] if q.startswith("reading(") and q not in failed]
    counters = report["counters"]
    return {
        "wall_s": run["wall"],
        "queries": len(report["executed"]),
        "readings": len(readings),
        "readings_per_minute": len(readings) / (run["wall"] / 60),
        # the replies to reading requests, fit or not: what the server got through
        "reading_replies": sum(1 for c in calls if c["task"] == "reading" and not c["cache_hit"]),
        "failed": len(failed),
        "transport_failures": transport,
        "page_failures": {q: m for q, m in causes.items() if q not in transport},
        "page_failures_by_cause": page_causes([m for q, m in causes.items() if q not in transport]),
        "not_built_because": len(failed) - len(causes),
        "model_calls": len(calls),
        "replies_refused": sum(1 for c in calls if c.get("error")),
        "tokens_in": int(counters.get("tokens in", 0)),
        "tokens_out": int(counters.get("tokens out", 0)),
        "source_tokens": source_tokens,
        "cancelled_by_server": cancelled,
        "exit": run["exit"],
    }


def page_causes(messages: list[str]) -> dict[str, int]:
    counts = dict.fromkeys((name for name, _ in PAGE_CAUSES), 0)
    for message in messages:
        counts[next(name for name, pattern in PAGE_CAUSES if pattern.search(message))] += 1
    return counts


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--corpus", type=Path, default=CORPUS)
    parser.add_argument("--documents", nargs="+", default=DOCUMENTS, help="paths inside the corpus")
    parser.add_argument("--slots", type=int, default=1, help="llama-server -np")
    # a reading may take its prompt and four times its part's tokens (max_tokens), and this base
    # model fills every string to its bound: at 8,192 the server's context ran out first (each
    # reading "cut at max_tokens", 0 built); 16,384 holds the three default documents' readings
    parser.add_argument("--context", type=int, default=16384, help="llama-server -c, per slot")
    parser.add_argument("--model-dir", type=Path, default=Path(os.environ.get("KBUILD_TEST_MODEL_DIR",
                                                                               Path.home() / ".cache" / "kbuild-bench")))
    parser.add_argument("--kbuild", default=f"{shlex.quote(sys.executable)} -m kbuild",
                        help="the command that runs kbuild (VAR=value words first set its environment)")
    parser.add_argument("--json", action="store_true", help="print the figures as JSON")
    args = parser.parse_args()
    documents = [args.corpus / d for d in args.documents]
    missing = [str(d) for d in documents if not d.is_file()]
    if missing:
        sys.exit(f"not found: {', '.join(missing)}; pass --corpus or --documents")
    words = shlex.split(args.kbuild)
    env = dict(os.environ)
    while words and re.match(r"^\w+=", words[0]):
        name, _, value = words.pop(0).partition("=")
        env[name] = value
    env.pop("PYTHONDONTWRITEBYTECODE", None)
    for name in ("OPENAI_API_KEY", "OPENAI_BASE_URL", "KBUILD_MODEL"):
        env.pop(name, None)

    with tempfile.TemporaryDirectory(prefix="llama-log-") as logs:
        server = llamacpp.start(llamacpp.model_file(args.model_dir), Path(logs) / "server.log", slots=args.slots,
                                context=args.context * args.slots)
        try:
            source_tokens = sum(server.tokens(d.read_text()) for d in documents)
            figures = summarise(build(documents, server, words, env), source_tokens, server.cancelled())
        finally:
            server.close()
    if args.json:
        print(json.dumps(figures, indent=1))
        return
    f = figures
    print(f"| {', '.join(d.name for d in documents)}: llama.cpp, Gemma 3 270M, {args.slots} slot(s) | |")
    print("|---|---|")
    for what, value in [
        ("wall time", f"{f['wall_s']:.0f} s"),
        ("readings", f"{f['readings']} in {f['wall_s'] / 60:.1f} min: {f['readings_per_minute']:.2f} a minute; "
                     f"{f['reading_replies']} replies to reading requests, fit or not "
                     f"({f['reading_replies'] / (f['wall_s'] / 60):.2f} a minute)"),
        ("queries failed", f"{f['failed']} of {f['queries']}: {len(f['transport_failures'])} transport, "
                           f"{len(f['page_failures'])} page, {f['not_built_because']} not built because of them"),
        ("pages failed for", ", ".join(f"{name}: {n}" for name, n in f["page_failures_by_cause"].items())),
        ("model calls", f"{f['model_calls']}, {f['replies_refused']} replies refused by their schema or checks"),
        ("tokens sent", f"{f['tokens_in']:,} against {f['source_tokens']:,} source tokens: "
                        f"{f['tokens_in'] / max(f['source_tokens'], 1):.1f}×; {f['tokens_out']:,} generated"),
        ("tasks the server cancelled (kbuild gave up on them)", str(f["cancelled_by_server"])),
    ]:
        print(f"| {what} | {value} |")
    for kind in ("transport_failures", "page_failures"):
        for query, message in sorted(f[kind].items()):  # type: ignore[attr-defined]
            print(f"{kind.replace('_', ' ')[:-1]}: {query}: {message[:300]}", file=sys.stderr)


if __name__ == "__main__":
    main()
