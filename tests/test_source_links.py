"""Links quoted from sources resolve in the store or lose their target (issue 15, item 10)."""
from __future__ import annotations

import functools
import json
import http.server
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest
from conftest import kbuild
from documents import scripted_kbuildfile
from model_replies import faithful_reply
from openai_server import ScriptedServer

from kbuild.checks.links import broken_links, broken_links_in
from kbuild.store.links import rewrite_source_links

GUIDE = """# Guide

Read [the main volume](volume-1.md#section-4) before anything else.
The [old notes](notes.txt) and ![the diagram](diagram.png) are kept in the folder.
The words are defined in [the glossary]({web}/glossary.html#chargeback), as [the standard](https://example.com/std) says.
"""

VOLUME = """# Volume 1

## Section 4

Every refund MUST be approved by 2 people.
"""

GLOSSARY = ("<html><body><h1>Glossary</h1><p>A <b>chargeback</b> is a payment reversed by the bank, "
            "as <a href=\"manual.html#banks\">the manual</a> and <a href=\"faq.html\">the answers</a> say.</p>"
            "</body></html>")
DISPATCH = '''"""Events go to the handler of their kind."""


def dispatch(handlers: dict, kind: str, event: object) -> object:
    """Call the handler registered for `kind` with the event."""
    return handlers[kind](event)
'''
FAQ = "<html><body><h1>Answers</h1><p>A chargeback takes 30 days.</p></body></html>"


class Quiet(http.server.SimpleHTTPRequestHandler):
    def log_message(self, *args: object) -> None:
        pass  # the requests would land in the output a test reads


@pytest.fixture
def web(tmp_path_factory) -> Iterator[str]:
    folder = tmp_path_factory.mktemp("web")
    (folder / "glossary.html").write_text(GLOSSARY)
    (folder / "faq.html").write_text(FAQ)
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), functools.partial(Quiet, directory=str(folder)))
    threading.Thread(target=server.serve_forever, daemon=True).start()
    yield f"http://127.0.0.1:{server.server_address[1]}"
    server.shutdown()


def linked_store(root: Path, web: str) -> None:
    """Two Markdown sources, one linking to the other; a file that is not a source; two pages
    fetched from a local server, the first linking to the second and to a page that is not listed."""
    (root / "docs").mkdir()
    (root / "docs/guide.md").write_text(GUIDE.format(web=web))
    (root / "docs/volume-1.md").write_text(VOLUME)
    (root / "docs/notes.txt").write_text("Old notes.\n")
    (root / "docs/dispatch.py").write_text(DISPATCH)
    (root / "kb/shop").mkdir(parents=True)
    (root / "kb/shop/sources.yml").write_text(
        "sources:\n  - id: guide\n    path: docs/guide.md\n  - id: volume-1\n    path: docs/volume-1.md\n"
        f"  - id: glossary\n    url: {web}/glossary.html\n  - id: faq\n    url: {web}/faq.html\n"
        "  - id: dispatch\n    path: docs/dispatch.py\n")


def assert_every_link_resolves(root: Path) -> None:
    pages = [p for p in (root / "kb").rglob("*.md") if "/raw/" not in p.as_posix()]
    found = {str(p): broken_links_in(p.read_text(), p, root / "kb", code=p.parent.name == "dispatch") for p in pages}
    assert {page: problems for page, problems in found.items() if problems} == {}
    result = kbuild(root, "check")
    assert result.exit_code == 0, result.output


def test_links_quoted_from_sources_lead_to_their_pages_to_the_web_or_nowhere(tmp_path, web):
    (tmp_path / "Kbuildfile.py").write_text("from pathlib import Path\nfrom kbuild.rules import knowledge_base\n"
                                            "kb = knowledge_base(Path(__file__).parent)\nRULES = kb.rules\n"
                                            "targets = kb.targets\nbefore_build = kb.before_build\n")
    linked_store(tmp_path, web)
    result = kbuild(tmp_path)
    assert result.exit_code == 0, result.output
    facts = tmp_path / "kb/shop/facts"
    guide = (facts / "guide/text.md").read_text()
    assert "Read [the main volume](../volume-1/index.md) before" in guide  # another source: its index
    assert "The old notes and the diagram are kept" in guide  # not a source: the words stay
    assert "in [the glossary](../glossary/index.md), as [the standard](https://example.com/std) says" in guide
    assert guide.count("\n") == GUIDE.count("\n")  # line N of text.md is still line N of the source
    glossary = (facts / "glossary/text.md").read_text()
    assert f"[the manual]({web}/manual.html#banks)" in glossary  # fetched from a url: made absolute
    assert "[the answers](../faq/index.md)" in glossary
    original = (facts / "guide/guide.md").read_text().split("## Original\n\n", 1)[1]
    assert original.startswith(guide)
    assert (facts / "dispatch/text.md").read_text() == DISPATCH  # code: brackets are not links
    assert_every_link_resolves(tmp_path)

    # Another source listed converts again only the sources whose links it may resolve.
    (tmp_path / "docs/extra.md").write_text("# Extra\n\nOne more page.\n")
    assert kbuild(tmp_path, "add", "shop", "docs/extra.md").exit_code == 0
    result = kbuild(tmp_path, "build", "--json")
    assert result.exit_code == 0, result.output
    converted = {q for q in json.loads(result.output[result.output.index("{"):])["executed"] if q.startswith("text(")}
    assert converted == {'text("shop","extra")', 'text("shop","guide")', 'text("shop","glossary")'}

    # A linked source that moves takes its links with it: the link that named its old path is gone.
    (tmp_path / "docs/volume-1.md").rename(tmp_path / "docs/volume.md")
    sources = tmp_path / "kb/shop/sources.yml"
    sources.write_text(sources.read_text().replace("docs/volume-1.md", "docs/volume.md"))
    assert kbuild(tmp_path).exit_code == 0
    assert "Read the main volume before" in (facts / "guide/text.md").read_text()
    assert_every_link_resolves(tmp_path)


def test_a_model_that_keeps_the_chunks_links_is_accepted(tmp_path, web):
    with ScriptedServer(faithful_reply, string_bounds=True) as server:
        (tmp_path / "Kbuildfile.py").write_text(scripted_kbuildfile(server.url) + "before_build = kb.before_build\n")
        linked_store(tmp_path, web)
        result = kbuild(tmp_path)
        assert result.exit_code == 0, result.output
    guide = (tmp_path / "kb/shop/facts/guide/guide.md").read_text()
    rewritten = guide.split("## Rewritten\n\n", 1)[1]
    assert "[the main volume](../volume-1/index.md)" in rewritten
    assert "[the standard](https://example.com/std)" in rewritten
    glossary = (tmp_path / "kb/shop/facts/glossary/glossary.md").read_text().split("## Rewritten\n\n", 1)[1]
    assert f"[the manual]({web}/manual.html#banks)" in glossary
    assert_every_link_resolves(tmp_path)


def test_code_and_figures_keep_what_looks_like_a_link():
    text = "```\nhandlers[kind](event)\n```\nCall `table[i](x)`. ![figure-01](figures/figure-01.png) [a](#top)\n"
    got = rewrite_source_links(text, "docs/a.md", "kb/p/facts/a/text.md", {}, {"figures/figure-01.png"})
    assert got == text


def test_the_check_reads_the_quoted_words_too_but_not_those_of_code(tmp_path):
    folder = tmp_path / "kb/p/facts/a"
    folder.mkdir(parents=True)
    page = folder / "a.md"
    page.write_text("Source: a\n\n## Original\n\nSee [v](volume-1.html), [w](https://e.com/w) and `[c](z.md)`.\n"
                    "## Rewritten\n\nSee [w](https://e.com/w), [e](https://evil.example/) and [v](volume-1.html).\n")
    assert broken_links(page, tmp_path / "kb") == [
        "links to a missing file: volume-1.html", "links outside the store: https://evil.example/",
        "links to a missing file: volume-1.html"]
    assert broken_links_in(page.read_text(), page, tmp_path / "kb", code=True) == [
        "links outside the store: https://evil.example/"]
