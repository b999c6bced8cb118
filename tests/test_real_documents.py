"""Documents as people write them build: Markdown with HTML tables, anchors and links, security
text that quotes `<script>`, READMEs, web pages and a feed (tests/data/wild, see its README), with
no failed page, no live HTML and no link that leads nowhere, offline and through a model server
that quotes its sources, and their revision histories replayed end as a clean build does."""
from __future__ import annotations

import shutil
from pathlib import Path

import pymupdf
import pytest
from conftest import kbuild
from documents import scripted_kbuildfile
from model_replies import quoting_reply
from openai_server import ScriptedServer

from kbuild.checks.links import broken_links
from kbuild.text.markdown import live_html

pytestmark = pytest.mark.slow  # real documents and their revisions built end to end: over a minute

WILD = Path(__file__).parent / "data" / "wild"

KEYS = """# Door keys

## <a name="cards"></a> 2.1 Key cards

<div class="text-left" markdown="1">
<table style="width:100%">
  <tr>
    <td><img src="media/card.png" alt="card"/></td>
    <td>A key card opens the doors of one building. A key card is <i>something you carry</i>.<br><br>

Key cards are similar to metal keys.</td>
  </tr>
  </table>
  </div>

### 2.1.1 Key card readers

A reader SHALL refuse a code it has already seen.
"""


def store(root: Path, files: dict[str, Path | str], kbuildfile: str | None = None) -> None:
    """A project "p" of `files` (name in the project -> a file to copy, or its text), not built."""
    assert kbuild(root, "init", str(root)).exit_code == 0
    if kbuildfile is not None:
        (root / "Kbuildfile.py").write_text(kbuildfile)
    for name, what in files.items():
        target = root / name
        target.parent.mkdir(parents=True, exist_ok=True)
        if isinstance(what, Path):
            shutil.copy(what, target)
        else:
            target.write_text(what)
        assert kbuild(root, "add", "p", name, "--id", Path(name).stem.lower().replace("_", "-")).exit_code == 0


def pages(root: Path) -> dict[str, str]:
    """Every page kbuild wrote (raw/ keeps the sources as they were)."""
    return {p.relative_to(root).as_posix(): p.read_text() for p in sorted((root / "kb").rglob("*.md"))
            if "/raw/" not in p.as_posix()}


def assert_clean_store(root: Path) -> None:
    """No page holds HTML a viewer would render, every link leads to a file of the store, and
    `kbuild check` finds nothing."""
    found = pages(root)
    assert found
    assert {name: live_html(text) for name, text in found.items() if live_html(text)} == {}
    dangling = {name: broken_links(root / name, root / "kb") for name in found}
    assert {name: links for name, links in dangling.items() if links} == {}
    check = kbuild(root, "check")
    assert check.exit_code == 0, check.output


def test_markdown_with_an_html_table_and_anchors_builds_into_a_markdown_table(tmp_path):
    store(tmp_path, {"keys.md": KEYS})
    result = kbuild(tmp_path)
    assert result.exit_code == 0, result.output
    text = (tmp_path / "kb/p/facts/keys/text.md").read_text()
    assert "## 2.1 Key cards" in text.splitlines()
    assert "| card | A key card opens the doors of one building. A key card is *something you carry*. " \
           "Key cards are similar to metal keys. |" in text
    assert text.splitlines()[15] == "### 2.1.1 Key card readers"  # line 16 of the source still
    assert_clean_store(tmp_path)


@pytest.mark.parametrize("cited", ["as described in [[KM-7]](#km7)", "as described in <https://example.com/keys>",
                                   "as [the key policy][policy] says", "(see <a href=\"#km7\">KM-7</a>)"])
def test_a_sentence_that_cites_by_link_is_summarised_by_its_words(tmp_path, cited):
    source = (f"# Key management\n\n## Rotation\n\nOperators SHALL rotate the signing keys {cited} every 90 days.\n\n"
              "Old keys are kept for audits.\n\n[policy]: https://example.com/policy\n")
    store(tmp_path, {"k.md": source})
    result = kbuild(tmp_path)
    assert result.exit_code == 0, result.output
    summary = (tmp_path / "kb/p/facts/k/index.md").read_text().split("\n\n")[2]  # after the title and "Up:"
    assert "Operators SHALL rotate the signing keys" in summary and "every 90 days" in summary
    assert "](" not in summary and "<" not in summary  # the words, not the link
    assert_clean_store(tmp_path)


def test_pythons_names_with_two_underscores_are_code_not_emphasis(tmp_path):
    store(tmp_path, {"n.md": "# Names\n\nPython mangles these names with the class name: if class Foo has an "
                             "attribute named __a, it cannot be accessed by Foo.__a.\n"})
    result = kbuild(tmp_path)
    assert result.exit_code == 0, result.output
    fact = (tmp_path / "kb/p/facts/n/names.md").read_text()
    assert "named `__a`, it cannot be accessed by `Foo.__a`." in fact.split("## Rewritten")[1]
    assert_clean_store(tmp_path)


# A standard published as a GitHub Pages site (Jekyll, kramdown): a volume's page and its
# glossary, written for this test in that form.
SITE_VOLUME = """---
layout: default
title: Authenticators
permalink: /guide/authenticators/
---

# Authenticator Requirements {#AUTH_SEC3}

{% include toc.html %}

Kind of secret| Purpose
--------------|--------
Password | A subscriber-chosen secret
{:latex-table="1"}

## Passwords {#password}

A password is a secret value chosen and remembered by the subscriber.
{:.authenticator-image}

Verifiers **SHALL** require passwords to be at least 8 characters long.

Verifiers **SHALL** limit failed password attempts to no more than 100, per SP 800-63B and FIPS 140-3.

!!! note "Storage"
    Verifiers **SHALL** store passwords salted and hashed, where offline attacks cannot reach them.
"""
SITE_GLOSSARY = """---
title: Glossary
---

# Glossary {#glossary}

memorized secret
: See _password_.
"""


def test_a_standard_kept_as_a_site_builds_clean_and_its_glossarys_old_names_are_asked_for(tmp_path):
    store(tmp_path, {"authenticators.md": SITE_VOLUME, "glossary.md": SITE_GLOSSARY})
    result = kbuild(tmp_path)
    assert result.exit_code == 0, result.output
    facts = pages(tmp_path)
    assert sorted(n for n in facts if n.startswith("kb/p/facts/authenticators/")) == [
        f"kb/p/facts/authenticators/{name}" for name in ("authenticator-requirements.md", "index.md", "text.md")]
    written = "\n".join(facts.values())
    for markup in ("layout", "permalink", "{#", "{:", "{%", "AUTH_SEC3"):
        assert markup not in written, markup
    assert "| Password | A subscriber-chosen secret |" in facts["kb/p/facts/authenticators/text.md"]
    context = kbuild(tmp_path, "context", "how long must a memorized secret be", "--trace", "--budget", "400")
    assert context.exit_code == 0, context.output
    assert "expanded by the glossary: memorized secret -> password" in context.output
    assert "at least 8 characters long" in context.output
    # an admonition's body is indented, which CommonMark reads as code: its words are prose again
    assert kbuild(tmp_path, "view", "add", "p", "storage", "--about", "password storage").exit_code == 0
    assert kbuild(tmp_path).exit_code == 0
    view = (tmp_path / "kb/p/artifacts/views/storage.md").read_text()
    assert "- Storage: Verifiers SHALL store passwords salted and hashed, where offline attacks cannot reach them." in view
    # a spec tests the limit, not the standard's numbers ("SP 800-63B" read as 63 bytes before)
    assert kbuild(tmp_path, "view", "add", "p", "attempts", "--about", "failed password attempts").exit_code == 0
    assert kbuild(tmp_path, "spec", "add", "p", "attempts-spec", "--view", "attempts").exit_code == 0
    assert kbuild(tmp_path).exit_code == 0
    spec = (tmp_path / "kb/p/artifacts/specs/attempts-spec.md").read_text()
    assert "(at 100 it holds; at 101 it fails)" in spec, spec
    assert "63 B" not in spec and "try it at" not in spec, spec  # no limit but the one the rule states
    assert_clean_store(tmp_path)


WILD_SOURCES = {f"docs/{p.relative_to(WILD).as_posix()}": p for p in sorted(WILD.glob("*/*"))
                if p.parent.name in ("owasp", "readmes", "html")}


def test_the_wild_documents_build_offline_with_clean_pages(tmp_path):
    store(tmp_path, WILD_SOURCES)
    result = kbuild(tmp_path)
    assert result.exit_code == 0, result.output
    assert "failed" not in result.output.split("\n")[-2].replace("0 failed", "")
    built = sorted(p.name for p in (tmp_path / "kb/p/facts").iterdir() if (p / "index.md").exists())
    assert len(built) == len(WILD_SOURCES)
    text = (tmp_path / "kb/p/facts/xss-filter-evasion-cheat-sheet/text.md").read_text()
    assert "```html\n<SCRIPT SRC=https://cdn.jsdelivr.net/gh/Moksh45/host-xss.rocks/index.js></SCRIPT>\n```" in text
    wikipedia = (tmp_path / "kb/p/facts/test-wikipedia/text.md").read_text()
    assert wikipedia.startswith("# Microsoft\n") and "Afrikaans" not in wikipedia  # the article, not the site
    feed = (tmp_path / "kb/p/facts/test-rss/text.md").read_text()
    assert "## Ignite 2024: Why nearly 70% of the Fortune 500 now use Microsoft 365 Copilot" in feed
    assert_clean_store(tmp_path)


def test_the_wild_documents_build_through_a_strict_server_that_quotes_its_sources(tmp_path):
    """A faithful model that copies its source's sentences, links and markup and all: what it
    copies is cleaned by code, and nothing fails."""
    with ScriptedServer(quoting_reply) as server:
        store(tmp_path, WILD_SOURCES, scripted_kbuildfile(server.url, validation_retries=1))
        result = kbuild(tmp_path)
        assert result.exit_code == 0, result.output
        assert server.errors == []
    kubernetes = (tmp_path / "kb/p/facts/kubernetes-security-cheat-sheet/index.md").read_text()
    assert "<https://" not in kubernetes
    assert_clean_store(tmp_path)


def _pdf_with_a_link() -> bytes:
    doc = pymupdf.open()
    page = doc.new_page()
    page.insert_text((72, 72), "Backups", fontsize=18)
    page.insert_text((72, 110), "The database is backed up every night. Backups are kept for 30 days.", fontsize=10)
    return doc.tobytes()


def test_a_pdf_read_by_a_model_that_quotes_its_source_never_sees_a_page_marker(tmp_path):
    with ScriptedServer(quoting_reply) as server:
        (tmp_path / "backups.pdf").write_bytes(_pdf_with_a_link())
        store(tmp_path, {}, scripted_kbuildfile(server.url, validation_retries=1))
        assert kbuild(tmp_path, "add", "p", "backups.pdf").exit_code == 0
        result = kbuild(tmp_path)
        assert result.exit_code == 0, result.output
        sent = "\n".join(str(m["content"]) for r in server.requests for m in r["messages"])
    assert "<!-- page" not in sent
    assert "<!--" not in (tmp_path / "kb/p/facts/backups/index.md").read_text()
    fact = next(p for p in (tmp_path / "kb/p/facts/backups").glob("*.md") if p.name not in ("index.md", "text.md"))
    assert "<!--" not in fact.read_text() and "pages 1 to 1" not in fact.read_text()
    assert_clean_store(tmp_path)


@pytest.mark.parametrize("sheet", ["authentication", "xss-prevention"])
def test_replaying_a_documents_revisions_ends_after_each_as_a_clean_build(tmp_path, sheet):
    """Each revision of a cheat sheet, built on the last (offline, exact cutoff: a rebuilt page
    that means the same keeps its old words by design, which a clean build has no old words
    for), gives the pages a build from nothing gives."""
    revisions = sorted((WILD / "revisions" / sheet).glob("rev-*.md"))
    assert len(revisions) >= 24
    edited = tmp_path / "edited"
    edited.mkdir()
    store(edited, {"sheet.md": revisions[0]})
    for revision in revisions:
        shutil.copy(revision, edited / "sheet.md")
        assert kbuild(edited, "build", "--cutoff", "exact").exit_code == 0
        clean = tmp_path / f"clean-{revision.stem}"
        clean.mkdir()
        store(clean, {"sheet.md": revision})
        assert kbuild(clean, "build", "--cutoff", "exact").exit_code == 0
        assert pages(edited) == pages(clean), revision.name
        shutil.rmtree(clean)
    assert_clean_store(edited)


def test_a_pick_that_copies_a_link_and_runs_over_two_sentences_places_both():
    """A real model (llama.cpp, Gemma 3 270M) picked "... 02:00 UTC (see the [runbook](https://...)).
    Backups are kept for 30 days." for the digest: the address's words put the quote under the
    60% bar of either sentence, and the digest said the sources hold nothing."""
    from kbuild.rules.facts import place_quotes

    sentences = ["The database is backed up every night at 02:00 UTC (see the runbook).",
                 "Backups are kept for 30 days.", "Restores are tested monthly."]
    quote = ("The database is backed up every night at 02:00 UTC (see the [runbook](https://example.com/runbook)). "
             "Backups are kept for 30 days.")
    assert place_quotes([quote], sentences) == [0, 1]
    assert place_quotes(["Nothing of the kind is said here at all."], sentences) == []
