"""Fetching url sources, against a local web server: what arrives, what is refused, what is kept."""
from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest

from kbuild.store.fetch import FetchError, download, fetch_urls
from kbuild.store.layout import Store

PAGE = b"# Refunds\n\nA refund is paid within 14 days.\n"


class Handler(BaseHTTPRequestHandler):
    pages: dict[str, bytes] = {}

    def do_GET(self) -> None:  # noqa: N802 (http.server's name)
        path = self.path
        if path.startswith("/hop/"):  # /hop/N redirects N times, then serves the page
            left = int(path.rsplit("/", 1)[1])
            self._redirect(f"/hop/{left - 1}" if left > 1 else "/page.md")
        elif path == "/loop":
            self._redirect("/loop")
        elif path == "/to-ftp":
            self._redirect("ftp://127.0.0.1/page.md")
        elif path == "/short":  # announces more than it sends, then closes
            self.send_response(200)
            self.send_header("Content-Length", str(len(PAGE) + 100))
            self.end_headers()
            self.wfile.write(PAGE)
            self.close_connection = True
        elif path == "/unannounced":  # no Content-Length: only the bytes themselves tell the size
            self.send_response(200)
            self.end_headers()
            self.wfile.write(PAGE * 40)
            self.close_connection = True
        elif path == "/trickle":  # a byte every 0.2 s, for at most 5 s
            self.send_response(200)
            self.end_headers()
            try:
                for _ in range(25):
                    self.wfile.write(b"x")
                    self.wfile.flush()
                    time.sleep(0.2)
            except OSError:
                pass  # the client gave up
            self.close_connection = True
        elif path in self.pages:
            body = self.pages[path]
            self.send_response(200)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)
        else:
            self.send_error(404, "Not Found")

    def _redirect(self, location: str) -> None:
        self.send_response(302)
        self.send_header("Location", location)
        self.send_header("Content-Length", "0")
        self.end_headers()

    def log_message(self, *args: object) -> None:
        pass


@pytest.fixture
def web() -> Iterator[str]:
    Handler.pages = {"/page.md": PAGE}
    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    server.daemon_threads = True
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}"
    finally:
        server.shutdown()
        server.server_close()


def test_a_page_arrives_as_the_server_sent_it_through_a_few_redirects(web: str, tmp_path: Path) -> None:
    assert download(f"{web}/page.md", tmp_path) == PAGE
    assert download(f"{web}/hop/3", tmp_path) == PAGE


@pytest.mark.parametrize("path, words", [
    ("/missing.md", "the server answered 404 Not Found"),
    ("/loop", "redirects more than 5 times (a redirect loop?)"),
    ("/hop/9", "redirects more than 5 times"),
    ("/to-ftp", "only http and https redirects are followed"),
    ("/short", "was cut short"),
])
def test_a_download_that_goes_wrong_says_how_in_one_line(web: str, tmp_path: Path, path: str, words: str) -> None:
    with pytest.raises(FetchError) as caught:
        download(f"{web}{path}", tmp_path)
    assert words in str(caught.value) and "\n" not in str(caught.value)


def test_a_body_over_the_size_limit_is_refused_announced_or_not(web: str, tmp_path: Path) -> None:
    Handler.pages["/big.md"] = PAGE * 40
    with pytest.raises(FetchError, match="larger than the .* limit .*bytes announced"):
        download(f"{web}/big.md", tmp_path, max_bytes=len(PAGE))
    with pytest.raises(FetchError, match="larger than the .* limit"):
        download(f"{web}/unannounced", tmp_path, max_bytes=len(PAGE))


def test_a_server_sending_too_slowly_is_cut_off_at_the_deadline(web: str, tmp_path: Path) -> None:
    with pytest.raises(FetchError, match="did not finish within 1 s"):
        download(f"{web}/trickle", tmp_path, timeout=1.0)


def test_a_server_that_is_not_there_cannot_be_reached(tmp_path: Path) -> None:
    import socket

    with socket.socket() as s:  # a port nobody listens on
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    with pytest.raises(FetchError, match="cannot be reached"):
        download(f"http://127.0.0.1:{port}/page.md", tmp_path)


def test_a_file_url_reads_inside_the_root_only(tmp_path: Path) -> None:
    root = tmp_path / "root"
    root.mkdir()
    (root / "page.md").write_bytes(PAGE)
    (tmp_path / "secret.txt").write_text("s")
    assert download(f"file://{root / 'page.md'}", root) == PAGE
    with pytest.raises(FetchError, match="leads outside"):
        download(f"file://{tmp_path / 'secret.txt'}", root)


def project(root: Path, web: str) -> None:
    (root / "kb/shop").mkdir(parents=True)
    (root / "kb/shop/sources.yml").write_text(
        f"sources:\n  - id: refunds\n    url: {web}/page.md\n  - id: local\n    path: notes.md\n")


def test_fetching_fills_raw_and_rewrites_nothing_when_the_bytes_are_the_same(web: str, tmp_path: Path) -> None:
    project(tmp_path, web)
    assert fetch_urls(tmp_path, Store()) == {}
    original = tmp_path / "kb/shop/raw/refunds/original.md"
    assert original.read_bytes() == PAGE
    meta = (tmp_path / "kb/shop/raw/refunds/meta.yml").read_text()
    assert f"url: {web}/page.md\n" in meta and f"bytes: {len(PAGE)}\n" in meta
    assert not (tmp_path / "kb/shop/raw/local").exists()  # a path source is copied by a rule, not here

    stamp = original.stat().st_mtime_ns
    time.sleep(0.01)
    assert fetch_urls(tmp_path, Store()) == {}
    assert original.stat().st_mtime_ns == stamp  # unchanged: not written, so no query sees a change

    Handler.pages["/page.md"] = PAGE + b"Edited.\n"
    assert fetch_urls(tmp_path, Store()) == {}
    assert original.read_bytes() == PAGE + b"Edited.\n"


def test_a_failed_download_keeps_the_copy_fetched_before_and_is_reported(web: str, tmp_path: Path) -> None:
    project(tmp_path, web)
    fetch_urls(tmp_path, Store())
    del Handler.pages["/page.md"]
    problems = fetch_urls(tmp_path, Store())
    assert problems == {("shop", "refunds"): (f"{web}/page.md", "the server answered 404 Not Found")}
    assert (tmp_path / "kb/shop/raw/refunds/original.md").read_bytes() == PAGE


def test_a_broken_sources_file_is_left_for_the_build_to_report(tmp_path: Path) -> None:
    (tmp_path / "kb/shop").mkdir(parents=True)
    (tmp_path / "kb/shop/sources.yml").write_text("sources: [\n")
    assert fetch_urls(tmp_path, Store()) == {}
