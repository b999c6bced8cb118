"""How many batches (layers) a cold build in batch mode needs, and what each holds.

    python benchmarks/batch_layers.py [--corpus ../shared/corpus]

Without --corpus, the repository's own corpus: the sources of kb/kbuild/sources.yml (README.md
and docs/), copied into a fresh store. Each layer is one `kbuild build --batch` process against
the tests' scripted server (tests/openai_server.py: OpenAI's Files and Batch APIs, the faithful
scripted model of tests/model_replies.py), whose batch is then completed; the build that collects
it submits the next layer. The same store built online gives the number of requests a cold build
makes, which the batches' requests must equal (nothing asked twice).
"""
from __future__ import annotations

import argparse
import collections
import json
import subprocess
import sys
import tempfile
from pathlib import Path

from ruamel.yaml import YAML

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "tests"))
sys.path.insert(0, str(REPO / "benchmarks"))

from installed import use_installed_kbuild  # noqa: E402

use_installed_kbuild()

from documents import scripted_kbuildfile  # noqa: E402
from model_replies import faithful_reply  # noqa: E402
from openai_server import ScriptedServer  # noqa: E402

WAITING = 4


def repository_sources() -> dict[str, str]:
    """The sources kbuild's own knowledge base lists (file name in the copy -> text)."""
    listed = YAML(typ="safe").load((REPO / "kb/kbuild/sources.yml").read_text())
    return {Path(s["path"]).name: (REPO / s["path"]).read_text() for s in listed["sources"]}


def corpus_sources(corpus: Path) -> dict[str, str]:
    """The newest revision of each document of a corpus folder (as benchmarks/amplification.py)."""
    docs = {}
    for entry in sorted(corpus.iterdir()):
        revisions = sorted(entry.glob("rev-*.rst")) if entry.is_dir() else []
        if revisions:
            docs[f"{entry.name}.rst"] = revisions[-1].read_text()
        elif entry.suffix in (".rst", ".md"):
            docs[entry.name] = entry.read_text()
    return docs


def make_store(root: Path, url: str, docs: dict[str, str]) -> None:
    (root / "kb/corpus").mkdir(parents=True)
    (root / "Kbuildfile.py").write_text(scripted_kbuildfile(url))
    for name, text in docs.items():
        (root / name).write_text(text)
    (root / "kb/corpus/sources.yml").write_text("sources:\n" + "".join(
        f"  - id: {Path(name).stem.lower().replace('_', '-')}\n    path: {name}\n" for name in docs))


def kbuild(root: Path, *args: str) -> tuple[int, str]:
    done = subprocess.run([sys.executable, "-m", "kbuild", "-C", str(root), *args], capture_output=True, text=True)
    return done.returncode, done.stdout + done.stderr


def schema_name(body: dict) -> str:
    fmt = body.get("response_format") or {}
    return (fmt.get("json_schema") or {}).get("name", fmt.get("type", "judge"))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--corpus", type=Path, help="a corpus folder instead of the repository's own sources")
    args = parser.parse_args()
    docs = corpus_sources(args.corpus) if args.corpus else repository_sources()
    with tempfile.TemporaryDirectory() as tmp:
        with ScriptedServer(faithful_reply, string_bounds=True) as server:
            online = Path(tmp) / "online"
            make_store(online, server.url, docs)
            online_code, output = kbuild(online)
            assert online_code in (0, 1), output  # the scripted model's answer may fail a page's checks
            online_requests = len(server.requests)
            online_failed = output.count("\nfailed: ") + output.startswith("failed: ")
        with ScriptedServer(faithful_reply, string_bounds=True) as server:
            root = Path(tmp) / "batch"
            make_store(root, server.url, docs)
            service = server.batch_service
            builds = 0
            while True:
                code, output = kbuild(root, "build", "--batch")
                builds += 1
                if code != WAITING:
                    break
                service.advance("completed")
            assert code == online_code, output
            assert server.requests == [], "a batch build asked the server online"
            print(f"{len(docs)} sources, {sum(len(t) for t in docs.values()) // 4:,} tokens (characters / 4)")
            print(f"{len(service.batches)} layers (batches), {builds} `kbuild build --batch` runs")
            for n, batch in enumerate(service.batches.values(), start=1):
                bodies = [json.loads(line)["body"] for line in service.files[batch.input_file_id].data.splitlines()]
                tasks = collections.Counter(schema_name(b) for b in bodies)
                print(f"  layer {n}: {len(bodies)} calls ({', '.join(f'{k} {v}' for k, v in sorted(tasks.items()))})")
            print(f"requests in batches: {len(service.requests)}; an online cold build: {online_requests}")
            print(f"exit code {code} at the end, as online ({online_failed} page failures at the root, the same)")


if __name__ == "__main__":
    main()
