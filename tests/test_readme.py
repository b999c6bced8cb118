"""The README's Quick start, run as written: its commands, in order, as a user types them.

Two things are put in place first, as the user's machine would have them: ~/docs/requirements.pdf
(a real PDF) and the RFC at its address, served from this machine (the tests reach no other
network; the command is run as written with the address swapped for the local server's)."""
from __future__ import annotations

import os
import re
import shlex
import subprocess
import sys
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

from documents import simple_pdf

README = Path(__file__).resolve().parents[1] / "README.md"
RFC_URL = "https://www.rfc-editor.org/rfc/rfc9110.txt"
RFC_TEXT = (b"HTTP Semantics\n\n1. Introduction\n\nA client MUST NOT send a request body with a GET request "
            b"unless the server allows it. Refunds of requests are not defined here.\n")


def quick_start() -> list[str]:
    section = README.read_text().split("## Quick start", 1)[1]
    block = re.search(r"```sh\n(.*?)```", section, re.S).group(1)
    return [line.split("  #", 1)[0].strip() for line in block.splitlines() if line.strip()]


class Rfc(BaseHTTPRequestHandler):
    def do_GET(self) -> None:  # noqa: N802 (http.server's name)
        self.send_response(200)
        self.send_header("Content-Length", str(len(RFC_TEXT)))
        self.end_headers()
        self.wfile.write(RFC_TEXT)

    def log_message(self, *args: object) -> None:
        pass


def test_the_quick_start_runs_as_written(tmp_path: Path) -> None:
    home = tmp_path / "home"
    (home / "docs").mkdir(parents=True)
    (home / "docs/requirements.pdf").write_bytes(simple_pdf(2))
    server = ThreadingHTTPServer(("127.0.0.1", 0), Rfc)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    env = {k: v for k, v in os.environ.items() if not k.startswith(("OPENAI_", "KBUILD_"))}
    env["HOME"] = str(home)
    cwd = tmp_path
    try:
        commands = quick_start()
        assert commands[0].startswith("kbuild init myproject") and any("~/docs/requirements.pdf" in c for c in commands)
        for command in commands:
            command = command.replace(RFC_URL, f"http://127.0.0.1:{server.server_address[1]}/rfc/rfc9110.txt")
            for step in command.split("&&"):
                # the shell expands ~ to the user's home: here, the test's
                words = [str(home) + w[1:] if w.startswith("~/") else w for w in shlex.split(step)]
                if words[0] == "cd":
                    cwd = cwd / words[1]
                    continue
                assert words[0] == "kbuild", command
                done = subprocess.run([sys.executable, "-m", "kbuild", *words[1:]], cwd=cwd, env=env,
                                      capture_output=True, text=True, timeout=600)
                assert done.returncode == 0, f"{command}\n{done.stdout}{done.stderr}"
                assert "Traceback" not in done.stderr
    finally:
        server.shutdown()
    project = tmp_path / "myproject"
    assert (project / "kb/payments/artifacts/specs/refund-api.md").exists()
    assert (project / "kb/payments/facts/rfc-9110/index.md").exists()
    assert (project / "sources/requirements.pdf").exists()  # the outside file, copied in
    again = subprocess.run([sys.executable, "-m", "kbuild", "check"], cwd=project, env=env, capture_output=True, text=True)
    assert again.returncode == 0, again.stdout + again.stderr
