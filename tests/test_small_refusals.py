"""Small refusals (issue 50, 12): each bad input is one line, exits non-zero, and leaves
nothing behind that a later build trips on."""
from __future__ import annotations

import json
import os
from pathlib import Path

import pytest
from conftest import kbuild
from documents import PAYMENTS, small_store

from kbuild.store.sources import parse


@pytest.mark.parametrize("url", ["http://[::1/x", "https://[fe80::1/a.md", "http://]x[/a"])
def test_an_unparsable_url_is_one_line_from_add_and_from_sources_yml(tmp_path, url):
    assert kbuild(tmp_path, "init", str(tmp_path)).exit_code == 0
    (tmp_path / "a.md").write_text("# A\n\nWords.\n")
    assert kbuild(tmp_path, "add", "p", "a.md").exit_code == 0
    result = kbuild(tmp_path, "add", "p", url)
    assert isinstance(result.exception, SystemExit), repr(result.exception)
    assert result.exit_code == 2 and "Traceback" not in result.output, result.output
    assert len(result.output.strip().splitlines()) == 1 and url in result.output, result.output
    assert url not in (tmp_path / "kb/p/sources.yml").read_text()
    for entry in (f"id: bad\n    url: '{url}'", f"url: '{url}'"):  # written by hand, with its id or without
        found = parse(f"sources:\n  - {entry}\n".encode(), "kb/p/sources.yml")
        assert found.sources == [] and (found.broken or found.problems)


@pytest.fixture
def shop(tmp_path: Path) -> Path:
    small_store(tmp_path, {"payments.md": PAYMENTS})
    return tmp_path


@pytest.mark.parametrize("text", ["Refunds\x00 are paid.", "Refunds are \x1b[31mpaid\x1b[0m.", "Refunds\x7f"])
def test_learn_refuses_a_control_character_in_a_notes_words(shop, text):
    for field in ("text", "title"):
        action = {"action": "add", "note": "payout", "base_revision": 0, "title": "Payout", "text": "Paid.",
                  "provenance": {"by": "agent", "origin": "agent"}} | {field: text}
        (shop / "d.json").write_text(json.dumps({"schema": "kbuild.delta/1", "project": "shop", "actions": [action]}))
        result = kbuild(shop, "learn", "d.json")
        assert result.exit_code == 1 and "Traceback" not in result.output, result.output
        assert "control character" in result.output and len(result.output.strip().splitlines()) == 1, result.output
        assert not (shop / "kb/shop/notes/payout.md").exists()
    assert kbuild(shop).exit_code == 0


def test_learn_keeps_tabs_and_line_breaks(shop):
    action = {"action": "add", "note": "payout", "base_revision": 0, "title": "Payout",
              "text": "Refunds are paid:\n\n\t- by card\r\n\t- by transfer", "provenance": {"by": "a", "origin": "agent"}}
    (shop / "d.json").write_text(json.dumps({"schema": "kbuild.delta/1", "project": "shop", "actions": [action]}))
    assert kbuild(shop, "learn", "d.json").exit_code == 0


def test_a_refused_binary_source_leaves_no_copy_in_raw(shop):
    (shop / "blob.bin").write_bytes(os.urandom(1 << 20) + b"\x00" * 1024)
    (shop / "blob.txt").write_bytes(b"\x7fELF\x00\x00" + os.urandom(1 << 20))
    for name in ("blob.bin", "blob.txt"):
        assert kbuild(shop, "add", "shop", name, "--id", name.replace(".", "-")).exit_code == 0
    result = kbuild(shop)
    assert result.exit_code == 1 and "Traceback" not in result.output, result.output
    assert "is binary data" in result.output, result.output
    assert not list((shop / "kb/shop/raw").glob("blob-*/*")), list((shop / "kb/shop/raw").glob("blob-*/*"))
    assert (shop / "kb/shop/raw/payments/original.md").is_file()


def test_a_refused_binary_download_leaves_no_copy_in_raw(shop):
    (shop / "blob.md").write_bytes(b"\x00\x01\x02" * 50_000)
    assert kbuild(shop, "add", "shop", (shop / "blob.md").as_uri(), "--id", "blob").exit_code == 0
    result = kbuild(shop)
    assert result.exit_code == 1 and "is binary data" in result.output, result.output
    assert not (shop / "kb/shop/raw/blob").exists()
