"""Building a knowledge base from real documents with the offline backend, as a new user would."""
from __future__ import annotations

import functools
import http.server
import json
import random
import re
import shutil
import threading
from collections.abc import Iterator
from pathlib import Path

import pymupdf
import pytest
from conftest import kbuild
from documents import three_page_pdf

from kbuild.checks.links import broken_links
from kbuild.text.markdown import PAGE_MARKER

REPO = Path(__file__).resolve().parents[1]

MARKDOWN = """# Payments service

The payments service accepts card payments and refunds them.

## Limits

A single payment may not exceed 10,000 EUR. Refunds are allowed within 90 days.
"""

REST = """Deployment guide
================

The service runs in two regions.

Rollback
--------

A rollback restores the previous release within 5 minutes. See :ref:`ops`.
"""

CODE = '''"""Rate limiting for the public API."""


def allowed(requests_this_minute: int, limit: int = 60) -> bool:
    """A client may make at most `limit` requests a minute."""
    return requests_this_minute < limit
'''

HTML = "<html><body><h1>Glossary</h1><p>A <b>chargeback</b> is a payment reversed by the bank.</p></body></html>"


@pytest.fixture
def web(tmp_path_factory) -> Iterator[str]:
    folder = tmp_path_factory.mktemp("web")
    (folder / "glossary.html").write_text(HTML)
    handler = functools.partial(http.server.SimpleHTTPRequestHandler, directory=str(folder))
    handler.log_message = lambda *a: None  # type: ignore[attr-defined]
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    yield f"http://127.0.0.1:{server.server_address[1]}"
    server.shutdown()


def generated_pages(root: Path) -> list[Path]:
    return [p for p in (root / "kb").rglob("*.md") if "/raw/" not in p.as_posix()]


def assert_all_links_resolve(root: Path) -> None:
    problems = {str(p.relative_to(root)): broken_links(p, root / "kb") for p in generated_pages(root)}
    assert {p: b for p, b in problems.items() if b} == {}


def assert_originals_match_text(root: Path) -> int:
    """Every fact's Original is byte for byte its span of text.md, but for the page markers of a
    paged document's text.md (kbuild's own, which a fact page shows as "pages 3 to 4" in its
    first line); returns the facts checked."""
    checked = 0
    for page in (root / "kb").rglob("*.md"):
        body = page.read_text()
        if not body.startswith("Source: "):
            continue
        start, end = map(int, re.search(r"text\.md\]\(text\.md\) lines (\d+) to (\d+)\.", body).groups())
        original = body.split("\n## Original\n\n", 1)[1].rsplit("\n## Rewritten\n\n", 1)[0]
        lines = (page.parent / "text.md").read_text().splitlines(keepends=True)
        assert original == "".join(line for line in lines[start - 1:end] if not PAGE_MARKER.match(line)), page
        checked += 1
    return checked


@pytest.fixture
def project(tmp_path: Path, web: str) -> Path:
    assert kbuild(tmp_path, "init", str(tmp_path)).exit_code == 0
    docs = tmp_path / "docs"
    docs.mkdir()
    (docs / "report.pdf").write_bytes(three_page_pdf())
    (docs / "payments.md").write_text(MARKDOWN)
    (docs / "deploy.rst").write_text(REST)
    (docs / "ratelimit.py").write_text(CODE)
    for path in ["docs/report.pdf", "docs/payments.md", "docs/deploy.rst", "docs/ratelimit.py", f"{web}/glossary.html"]:
        result = kbuild(tmp_path, "add", "payments", path)
        assert result.exit_code == 0, result.output
    return tmp_path


def test_a_store_from_real_documents(project):
    result = kbuild(project)
    assert result.exit_code == 0, result.output
    kb = project / "kb"
    for path in ["index.md", "payments/index.md", "payments/sources.yml", "payments/raw/index.md",
                 "payments/facts/index.md", "payments/artifacts/index.md",
                 "payments/raw/report/original.pdf", "payments/raw/report/meta.yml",
                 "payments/raw/glossary/original.html", "payments/raw/glossary/meta.yml",
                 "payments/facts/report/index.md", "payments/facts/report/text.md",
                 "payments/facts/report/pages/p-001.png", "payments/facts/report/pages/p-003.png",
                 "payments/facts/report/figures/table-01.png", "payments/facts/report/figures/table-01.md",
                 "payments/facts/report/figures/figure-01.png", "payments/facts/report/figures/figure-01.md",
                 "payments/facts/payments/index.md", "payments/facts/deploy/index.md",
                 "payments/facts/ratelimit/index.md", "payments/facts/glossary/index.md"]:
        assert (kb / path).exists(), path
    assert (kb / "payments/raw/report/original.pdf").read_bytes() == (project / "docs/report.pdf").read_bytes()
    assert (kb / "payments/facts/payments/text.md").read_text() == MARKDOWN  # line numbers kept
    assert "hash: xxh3-128:" in (kb / "payments/raw/report/meta.yml").read_text()
    assert "apple" in (kb / "payments/facts/report/figures/table-01.md").read_text()
    fact_pages = [p for p in (kb / "payments/facts").rglob("*.md") if p.read_text().startswith("Source: ")]
    assert len(fact_pages) >= 5
    pdf_fact = next(p for p in fact_pages if "/report/" in p.as_posix())
    assert re.match(r"Source: \[original\.pdf\]\(\.\./\.\./raw/report/original\.pdf\), pages? \d", pdf_fact.read_text())
    markdown_facts = [p for p in fact_pages if "/facts/payments/" in p.as_posix()]
    assert any("10,000 EUR" in p.read_text().split("## Rewritten")[1] for p in markdown_facts)
    assert "extractive" in (kb / "payments/index.md").read_text()
    assert_all_links_resolve(project)
    assert assert_originals_match_text(project) == len(fact_pages)
    again = kbuild(project, "build", "--json")
    assert '"executed": []' in again.output


def prose(rng: random.Random, sentences: int) -> list[str]:
    words = ("ledger account balance transfer clearing settlement batch window audit record export "
             "report merchant refund payout reserve currency rate fee invoice schedule retry limit").split()
    return [" ".join(rng.choice(words) for _ in range(rng.randint(8, 22))).capitalize() + "." for _ in range(sentences)]


@pytest.mark.slow
def test_a_one_sentence_edit_changes_at_most_two_facts_and_renames_none(tmp_path):
    rng = random.Random(5)
    sections, paragraphs = [], []
    for s in range(24):  # some sections hold several chunks: long stretches with no heading
        paragraphs = ["\n".join(prose(rng, rng.randint(4, 9))) for _ in range(rng.randint(8, 40))]
        sections.append(f"## Section {s}\n\n" + "\n\n".join(paragraphs))
    text = "# Operations manual\n\n" + "\n\n".join(sections) + "\n"
    assert kbuild(tmp_path, "init", str(tmp_path)).exit_code == 0
    (tmp_path / "manual.md").write_text(text)
    kbuild(tmp_path, "add", "ops", "manual.md")
    assert kbuild(tmp_path).exit_code == 0
    facts_dir = tmp_path / "kb/ops/facts/manual"

    def facts() -> dict[str, str]:
        return {p.name: p.read_text() for p in facts_dir.glob("*.md") if p.name not in ("index.md", "text.md")}

    before = facts()
    assert len(before) >= 30
    lines = text.splitlines()
    middle = len(lines) // 2
    target = next(i for i in range(middle, len(lines)) if lines[i].count(".") >= 1 and len(lines[i]) > 40)
    lines[target] = lines[target].replace(".", " and a clause that was added later.", 1)
    (tmp_path / "manual.md").write_text("\n".join(lines) + "\n")
    assert kbuild(tmp_path).exit_code == 0
    after = facts()
    assert set(after) == set(before)  # no fact page renamed, none added or removed
    changed = [name for name in before if before[name] != after[name]]
    # a fact page names its lines in text.md; the lines after the edit keep their numbers
    assert 1 <= len(changed) <= 2, changed
    assert_all_links_resolve(tmp_path)


def chaptered_manual(parts: int) -> str:
    """A standard's shape: chapters of 20 short parts, one fact each with small facts."""
    return "# Manual\n\n" + "".join(
        (f"## Chapter {n // 20}\n\n" if n % 20 == 0 else "")
        + f"### Part {n}\n\nThe limit of part {n} is {n + 3} items. Each item waits {n % 7 + 1} seconds.\n\n"
        for n in range(parts))


def test_a_one_sentence_edit_loads_what_it_reaches_not_every_fact_of_the_document(tmp_path, monkeypatch):
    """An edit of one sentence reaches its own fact and the source-wide pages, so the queries a
    build loads and checks must not grow with the document: at 2,000 facts it loaded 4,821
    queries to run 23 (one per fact), then 1,023 (one per group of facts, each group's queries
    reading all of fact_groups)."""
    from documents import small_store

    from kbuild.engine.graphload import GraphLoading

    reached: list[int] = []
    real = GraphLoading._load_reached

    def counting(self: GraphLoading, *args: object) -> None:
        real(self, *args)
        assert self.reached is not None
        reached.append(len(self.reached))

    monkeypatch.setattr(GraphLoading, "_load_reached", counting)
    sizes = {}
    for parts in (40, 120):
        root = tmp_path / str(parts)
        small_store(root, {"manual.md": chaptered_manual(parts)})
        assert kbuild(root).exit_code == 0
        facts = len(list((root / "kb/shop/facts/manual").glob("part-*.md")))
        assert facts >= parts // 2, facts
        manual = root / "manual.md"
        manual.write_text(manual.read_text().replace("The limit of part 7 is", "The limit of part 7 was"))
        reached.clear()
        assert kbuild(root).exit_code == 0
        sizes[facts] = reached[-1]
    (_, at_small), (_, at_large) = sorted(sizes.items())
    assert at_large == at_small, sizes


@pytest.mark.slow
def test_a_long_source_regrouped_by_an_edit_ends_as_a_clean_build_of_it(tmp_path):
    """Parts added to a chapter of a long source give it one more group of facts, which moves
    the number of every later group and its index page. Each group's queries read their own
    part of group_places, so the edit must still end where a clean build of the new text
    does: the same pages and the same lock."""
    from documents import small_store

    added = "".join(f"### Part 24{c}\n\nThe limit of part 24{c} is {n + 2} items. Each item waits {n} seconds.\n\n"
                    for n, c in enumerate("abcde", start=1))
    before = chaptered_manual(180)
    after = before.replace("### Part 25\n", added + "### Part 25\n")
    incremental, clean = tmp_path / "incremental", tmp_path / "clean"
    small_store(incremental, {"manual.md": before})
    assert kbuild(incremental).exit_code == 0
    groups_before = sorted(p.name for p in (incremental / "kb/shop/facts/manual").glob("index-*.md"))
    (incremental / "manual.md").write_text(after)
    assert kbuild(incremental).exit_code == 0
    small_store(clean, {"manual.md": after})
    assert kbuild(clean).exit_code == 0

    def pages(root: Path) -> dict[str, str]:
        return {p.relative_to(root).as_posix(): p.read_text() for p in sorted((root / "kb").rglob("*.md"))}

    built = pages(incremental)
    assert len([p for p in built if "/index-" in p]) == len(groups_before) + 1  # chapter 1 has a third page
    assert built == pages(clean)
    assert (incremental / "kbuild.lock").read_text() == (clean / "kbuild.lock").read_text()



def test_every_part_a_query_reads_is_one_its_maker_recorded(tmp_path):
    """A reader of one entry of a parted value names it as the rule that made the value does
    (rules/values.py's Part): an entry spelled otherwise would read as absent, and the reader
    would run on nothing, or again at every build."""
    from documents import small_store

    small_store(tmp_path, {"manual.md": chaptered_manual(180)})
    assert kbuild(tmp_path).exit_code == 0
    entries = {}
    for lock in [tmp_path / "kbuild.lock", *(tmp_path / "kbuild.lock.d").glob("*.lock")]:
        entries.update(json.loads(lock.read_text())["queries"])
    kinds = set()
    for entry in entries.values():
        for group in entry["deps"]:
            for read, digest in group:
                if "@" in digest and read in entries:
                    value_hash, part = digest.split("@", 1)
                    assert entries[read].get("parts", {}).get(part) == value_hash, (read, part)
                    kinds.add(part.split(":")[0])
    assert {"header", "region", "words", "chunk", "group", "page"} <= kinds, kinds

def test_a_long_source_s_index_links_a_page_per_section_part_and_an_edit_rewrites_one(tmp_path):
    """A source of more facts than one index page lists gets a line per section on its index,
    linking to pages of at most GROUP_FACTS facts each; an edit of one sentence rewrites the
    one page that lists its fact."""
    from documents import small_store

    chapters = 9
    small_store(tmp_path, {"manual.md": chaptered_manual(20 * chapters)})
    assert kbuild(tmp_path).exit_code == 0
    folder = tmp_path / "kb/shop/facts/manual"
    facts = [p for p in folder.glob("*.md") if not p.name.startswith(("index", "text"))]
    assert len(facts) > 150  # more than one index page lists (indexes.INDEX_LINES)
    index = (folder / "index.md").read_text()
    lines = [ln for ln in index.split("## Facts, in source order\n\n")[1].splitlines() if ln]
    assert len(lines) <= chapters + 1, lines  # a line per section, not per fact
    assert "- Chapter 3: [12 facts](index-chapter-3.md), [8 facts](index-chapter-3-2.md)" in lines, lines
    pages = {p.name: p.read_text() for p in folder.glob("index-*.md")}
    assert "[part-75](part-75.md)" in pages["index-chapter-3-2.md"]
    listed = [name for text in pages.values() for name in re.findall(r"^- \[[^]]+\]\(([^)]+)\)", text, re.M)]
    assert sorted(listed) == sorted(p.name for p in facts)  # each fact on one page, once
    assert_all_links_resolve(tmp_path)
    found = json.loads(kbuild(tmp_path, "search", "--json", "limit of part 75").output)["hits"][0]
    assert (found["page"], found["index"]) == ("kb/shop/facts/manual/part-75.md", "kb/shop/facts/manual/index-chapter-3-2.md")
    shown = json.loads(kbuild(tmp_path, "show", "kb/shop/facts/manual/part-75.md", "--json").output)
    assert shown["parent"] == "kb/shop/facts/manual/index-chapter-3-2.md"
    shown = json.loads(kbuild(tmp_path, "show", "kb/shop/facts/manual/index-chapter-3-2.md", "--json").output)
    assert shown["parent"] == "kb/shop/facts/manual/index.md" and len(shown["children"]) == 8
    manual = tmp_path / "manual.md"
    manual.write_text(manual.read_text().replace("The limit of part 75 is", "The limit of part 75 was"))
    assert kbuild(tmp_path).exit_code == 0
    after = {p.name: p.read_text() for p in folder.glob("index-*.md")}
    assert [name for name in pages if after[name] != pages[name]] == ["index-chapter-3-2.md"]
    assert "The limit of part 75 was" in after["index-chapter-3-2.md"]
    assert (folder / "index.md").read_text() == index


def test_bad_input_gets_one_clear_line_and_the_rest_is_built(tmp_path, web):
    assert kbuild(tmp_path, "init", str(tmp_path)).exit_code == 0
    docs = tmp_path / "docs"
    docs.mkdir()
    (docs / "good.md").write_text(MARKDOWN)
    (docs / "corrupt.pdf").write_bytes(b"%PDF-1.7\n" + bytes(random.Random(1).randrange(256) for _ in range(3000)))
    encrypted = pymupdf.open()
    encrypted.new_page().insert_text((72, 72), "secret")
    (docs / "locked.pdf").write_bytes(encrypted.tobytes(encryption=pymupdf.PDF_ENCRYPT_AES_256, user_pw="x", owner_pw="y"))
    (docs / "empty.txt").write_bytes(b"")
    (docs / "binary.txt").write_bytes(bytes(range(256)) * 40)
    for path in ["docs/good.md", "docs/corrupt.pdf", "docs/locked.pdf", "docs/empty.txt", "docs/binary.txt"]:
        assert kbuild(tmp_path, "add", "main", path).exit_code == 0
    sources = tmp_path / "kb/main/sources.yml"
    sources.write_text(sources.read_text() + (
        "  - id: gone\n    path: docs/missing.md\n"
        f"  - id: dead-link\n    url: {web}/missing.html\n"
        "  - id: escape\n    path: ../outside.md\n"
        "  - id: ../sneaky\n    path: docs/good.md\n"))
    (tmp_path / "outside.md").write_text("outside")
    broken = tmp_path / "kb/broken"
    broken.mkdir()
    (broken / "sources.yml").write_text("sources: [\n  - id: x\n")
    result = kbuild(tmp_path)
    assert result.exit_code == 1
    output = result.output
    assert "Traceback" not in output
    expected = {
        "corrupt": "main/corrupt", "locked": "password", "empty": "is empty", "binary": "binary",
        "gone": "docs/missing.md does not exist", "dead-link": "404", "escape": "leads outside",
        "sneaky": "source id '../sneaky' must be", "broken": "kb/broken/sources.yml is not valid YAML",
    }
    failures = [line for line in output.splitlines() if line.startswith("failed: ")]
    for name, words in expected.items():
        assert any(words in line for line in failures), (name, words, output)
    assert len(failures) == len(expected), output  # one line each, no echo from what depended on them
    assert "10,000 EUR" in (tmp_path / "kb/main/facts/good/payments-service.md").read_text()  # built
    # made for the first time, the indexes above a failed source name what failed
    assert "- [Payments service](facts/good/index.md)" in (tmp_path / "kb/main/index.md").read_text()
    assert "- gone: not built" in (tmp_path / "kb/main/index.md").read_text()
    assert "broken: not built" in (tmp_path / "kb/index.md").read_text()
    assert_all_links_resolve(tmp_path)
    with_debug = kbuild(tmp_path, "--debug")
    assert "Traceback" in with_debug.output
    sources.write_text("sources:\n  - id: good\n    path: docs/good.md\n")
    (broken / "sources.yml").unlink()
    assert kbuild(tmp_path).exit_code == 0
    assert "- [Payments service](facts/good/index.md)" in (tmp_path / "kb/main/index.md").read_text()
    assert_all_links_resolve(tmp_path)


def test_add_keeps_comments_and_order(tmp_path):
    assert kbuild(tmp_path, "init", str(tmp_path)).exit_code == 0
    assert "Kbuildfile.py" in kbuild(tmp_path, "init", str(tmp_path)).output  # refuses to overwrite
    (tmp_path / "kb/notes").mkdir(parents=True)
    (tmp_path / "kb/notes/sources.yml").write_text(
        "# my research notes\nkind: research  # as found\nsources:\n  # the first one\n"
        "  - id: b\n    path: b.md\n  - id: a\n    path: a.md\n")
    (tmp_path / "c.md").write_text("# C\n\nSee.\n")
    result = kbuild(tmp_path, "add", "notes", "c.md", "--id", "c")
    assert result.exit_code == 0, result.output
    text = (tmp_path / "kb/notes/sources.yml").read_text()
    assert text.startswith("# my research notes\nkind: research  # as found\n")
    assert "# the first one" in text
    assert text.index("id: b") < text.index("id: a") < text.index("id: c")
    again = kbuild(tmp_path, "add", "notes", "c.md", "--id", "c")  # listed already: nothing to do, nothing twice
    assert again.exit_code == 0 and "already listed" in again.output
    assert (tmp_path / "kb/notes/sources.yml").read_text() == text
    assert ".kbuild/" in (tmp_path / ".gitignore").read_text()


@pytest.mark.slow
def test_the_repositorys_own_knowledge_base_builds(tmp_path):
    """Kbuildfile.py at the root builds kbuild's README and docs with the offline backend."""
    for name in ["Kbuildfile.py", "README.md"]:
        shutil.copy(REPO / name, tmp_path / name)
    shutil.copytree(REPO / "docs", tmp_path / "docs")
    (tmp_path / "kb/kbuild").mkdir(parents=True)
    shutil.copy(REPO / "kb/kbuild/sources.yml", tmp_path / "kb/kbuild/sources.yml")
    result = kbuild(tmp_path)
    assert result.exit_code == 0, result.output
    assert (tmp_path / "kb/kbuild/facts/readme/index.md").exists()
    assert_all_links_resolve(tmp_path)


def test_a_document_that_starts_at_a_second_level_heading_is_titled_by_it():
    from kbuild.rules.facts import _title

    assert _title("intro line\n\n## Retry policy\n\ntext\n\n### Limits\n", "policy-doc") == "Retry policy"
    assert _title("## Preface\n\n# The real title\n", "x") == "The real title"  # the highest heading wins
    assert _title("Title\n=====\n\n## Part\n", "x") == "Title"
    assert _title("no heading at all\n", "the-id") == "the-id"


def test_offline_summaries_are_statements_of_the_text_not_its_markup_references_or_repeats():
    """A summary stands in every index above its page: whole sentences of the prose, each once;
    no footnote marks, no reference list, no list marker, no lead-in to a block left out."""
    from kbuild.model.offline import summarise

    text = """Retries
=======

- Retries MUST stop after 3 attempts [#limit]_, as the gateway counts them per account.
- Each retry waits twice as long as the one before it, from one second up.

To configure them, write a block of the form::

    retries: 3

References
==========

.. [#limit] The gateway's own limit, see its manual at https://example.com/manual and
   the RFC 9110 discussion of idempotent requests and their retries and limits.
"""
    summary = summarise(text)
    assert "Retries MUST stop after 3 attempts, as the gateway counts them per account." in summary
    assert "[#limit]_" not in summary and "example.com" not in summary and "RFC" not in summary
    assert not summary.startswith("-") and not summary.rstrip().endswith(":")
    assert summarise(f"{text}\n\n{text}").count("Retries MUST stop") == 1
    assert summarise("```\nx = 1\n```\n") == "x = 1"  # a part with only code is summarised by its words


def test_offline_rewrites_keep_code_as_code():
    """`x < y` in a code span is code: unwrapped, it would read as an HTML tag and fail the page."""
    from kbuild.text.prose import clean

    assert clean("Wildcard imports (``from <module> import *``) should be **avoided**.") == \
        "Wildcard imports (`from <module> import *`) should be avoided."


def test_a_documents_header_of_fields_is_not_summarised_as_prose_and_email_addresses_are_no_tags():
    """A PEP's "Author: Name <mail at host>" header cut into a part of its own failed the
    summary's HTML check; its prose starts after the header."""
    from kbuild.model.offline import summarise
    from kbuild.text.prose import clean

    header = "PEP: 747\nTitle: Annotating Type Forms\nAuthor: David Foster <david at dafoster.net>\nStatus: Draft\n"
    assert clean(header + "\nType forms are values.\n", prose_only=True) == "Type forms are values."
    assert "<" not in summarise(header) and "David Foster" in summarise(header)
    assert clean("Note: this one line is prose.", prose_only=True) == "Note: this one line is prose."


def test_code_in_a_summary_is_not_markup_and_markup_is_cleaned_to_its_words():
    from kbuild.rules.guard import plain_text, plain_text_failures

    assert plain_text("Use `TypeForm[T](x)` when `x < y` holds.") == "Use `TypeForm[T](x)` when `x < y` holds."
    assert plain_text_failures("Use `TypeForm[T](x)` when `x < y` holds.", "TypeForm x y holds") == []
    assert plain_text("Click <a href=x>here</a> now.") == "Click here now."
    # markup the sources do not quote is shown as code, and refused; quoted by them, it stands
    assert plain_text("Run <script>alert(1)</script> now.") == "Run `<script>`alert(1)`</script>` now."
    assert plain_text_failures(plain_text("Run <script>alert(1)</script> now."), "Run it now") == [
        "quotes `<script>`, which its sources do not", "quotes `</script>`, which its sources do not"]
    assert plain_text_failures("Never echo `<script>` back.", "Never echo `<script>` back, the sheet says.") == []
