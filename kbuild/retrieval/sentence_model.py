"""A sentence-transformers BERT model (all-MiniLM-L6-v2 and its kind) run with numpy: the
vectors semantic ranking compares, offline, with no torch.

Hand-written because no library runs such a model here without torch (several GB from PyPI)
or an ONNX graph (no package carries one): sentence-transformers' own code gives the same
vectors (cosine 0.999998 or more, tests/test_sentence_model.py), and this is as fast on the
CPU (`python benchmarks/semantic.py --against-torch`, 2026-12-07, this 2-core machine: 66
pieces of 700 characters in 2.6 s, 2.9 s with sentence-transformers on torch 2.13 CPU). The tokenizer is Hugging Face's `tokenizers`, the weights
are read with `safetensors`: the model's own files, as its folder holds them.

GELU is the tanh form (within 1e-3 of the exact one, whose erf numpy lacks and whose series
took 40 % of the time); attention and layer norm are the model's own.
"""
from __future__ import annotations

import json
import math
from functools import cache
from pathlib import Path

import numpy as np

# texts a forward pass: a larger batch outgrows the CPU's cache (`python benchmarks/semantic.py`,
# 2026-12-07, 66 pieces of prose: 1.81 s at 4, 1.92 s at 8, 2.47 s at 16, 3.51 s at 32)
BATCH = 8


class ModelFolderError(ValueError):
    """A folder that holds no BERT sentence model this module can run."""


class SentenceModel:
    """A folder as sentence-transformers saves one: config.json (a BERT), model.safetensors,
    tokenizer.json, sentence_bert_config.json (max_seq_length) and 1_Pooling/config.json."""

    def __init__(self, folder: Path) -> None:
        from safetensors.numpy import load_file
        from tokenizers import Tokenizer

        missing = [name for name in ("config.json", "model.safetensors", "tokenizer.json") if not (folder / name).is_file()]
        if missing:
            raise ModelFolderError(f"{folder} is not a sentence model's folder (no {', '.join(missing)})")
        config = json.loads((folder / "config.json").read_text("utf-8"))
        if config.get("model_type") != "bert":
            raise ModelFolderError(f"{folder}: a {config.get('model_type')!r} model; only BERT models run here")
        self.layers = int(config["num_hidden_layers"])
        self.heads = int(config["num_attention_heads"])
        self.eps = float(config.get("layer_norm_eps", 1e-12))
        self.weights = {name.removeprefix("bert."): array.astype(np.float32)
                        for name, array in load_file(folder / "model.safetensors").items()}
        self.mean_pooling = _pooling(folder) != "cls"
        self.tokenizer = Tokenizer.from_file(str(folder / "tokenizer.json"))
        self.tokenizer.enable_truncation(_max_length(folder, config))
        self.tokenizer.enable_padding()

    def encode(self, texts: list[str]) -> np.ndarray:
        """One vector of length 1 per text, in the texts' order."""
        rows: list[np.ndarray] = [np.empty(0)] * len(texts)
        by_length = sorted(range(len(texts)), key=lambda n: len(texts[n]))  # a batch pads to its longest
        for start in range(0, len(texts), BATCH):
            batch = by_length[start:start + BATCH]
            for n, vector in zip(batch, self._forward([texts[n] for n in batch])):
                rows[n] = vector
        dims = self.weights["embeddings.word_embeddings.weight"].shape[1]
        return np.stack(rows) if rows else np.zeros((0, dims), dtype=np.float32)

    def _forward(self, texts: list[str]) -> np.ndarray:
        w = self.weights
        encoded = self.tokenizer.encode_batch(texts)
        ids = np.array([e.ids for e in encoded])
        kinds = np.array([e.type_ids for e in encoded])
        mask = np.array([e.attention_mask for e in encoded], dtype=np.float32)
        batch, length = ids.shape
        x = (w["embeddings.word_embeddings.weight"][ids] + w["embeddings.position_embeddings.weight"][:length]
             + w["embeddings.token_type_embeddings.weight"][kinds])
        x = self._norm(x, "embeddings.LayerNorm")
        width = x.shape[-1] // self.heads
        padding = (1.0 - mask)[:, None, None, :] * -1e9  # a padded token is never attended to
        for layer in range(self.layers):
            p = f"encoder.layer.{layer}."
            query, key, value = (self._linear(x, p + f"attention.self.{name}").reshape(batch, length, self.heads, width)
                                 .transpose(0, 2, 1, 3) for name in ("query", "key", "value"))
            scores = query @ key.transpose(0, 1, 3, 2)
            scores = scores / math.sqrt(width) + padding
            scores = np.exp(scores - scores.max(-1, keepdims=True))
            scores /= scores.sum(-1, keepdims=True)
            attended = (scores @ value).transpose(0, 2, 1, 3).reshape(batch, length, -1)
            x = self._norm(x + self._linear(attended, p + "attention.output.dense"), p + "attention.output.LayerNorm")
            h = self._linear(x, p + "intermediate.dense")
            h = 0.5 * h * (1.0 + np.tanh(0.7978845608 * (h + 0.044715 * h * h * h)))  # GELU
            x = self._norm(x + self._linear(h, p + "output.dense"), p + "output.LayerNorm")
        pooled = (x * mask[..., None]).sum(1) / mask.sum(1, keepdims=True) if self.mean_pooling else x[:, 0]
        norms = np.linalg.norm(pooled, axis=1, keepdims=True)
        return (pooled / np.where(norms == 0, 1, norms)).astype(np.float32)

    def _linear(self, x: np.ndarray, name: str) -> np.ndarray:
        return x @ self.weights[name + ".weight"].T + self.weights[name + ".bias"]

    def _norm(self, x: np.ndarray, name: str) -> np.ndarray:
        mean = x.mean(-1, keepdims=True)
        variance = ((x - mean) ** 2).mean(-1, keepdims=True)
        return (x - mean) / np.sqrt(variance + self.eps) * self.weights[name + ".weight"] + self.weights[name + ".bias"]


def _pooling(folder: Path) -> str:
    found = folder / "1_Pooling" / "config.json"
    if not found.is_file():
        return "mean"
    config = json.loads(found.read_text("utf-8"))
    return "cls" if config.get("pooling_mode_cls_token") else "mean"


def _max_length(folder: Path, config: dict[str, object]) -> int:
    found = folder / "sentence_bert_config.json"
    if found.is_file():
        return int(json.loads(found.read_text("utf-8")).get("max_seq_length", 512))
    return int(config.get("max_position_embeddings", 512))  # type: ignore[call-overload]


@cache
def loaded(folder: Path) -> SentenceModel:
    """Loaded once a process (0.3 s for all-MiniLM-L6-v2's 90 MB)."""
    return SentenceModel(folder)
