"""sources.yml as a person writes it: what is read, what one bad entry costs, what `add` keeps."""
from __future__ import annotations

import os
from pathlib import Path

import pytest

from kbuild.store.sources import Source, SourcesError, SpecRequest, ViewRequest, add, parse, resolve_path


def listing(text: str):
    return parse(text.encode(), "kb/shop/sources.yml")


def test_sources_are_read_in_order_with_their_kind_and_title() -> None:
    found = listing("kind: research\ntitle: Payments\nsources:\n"
                    "  - id: rfc\n    url: https://www.rfc-editor.org/rfc/rfc9110.txt\n"
                    "  - id: notes\n    path: docs/notes.md\n")
    assert (found.kind, found.title) == ("research", "Payments")
    assert [(s.id, s.origin) for s in found.sources] == [
        ("rfc", "https://www.rfc-editor.org/rfc/rfc9110.txt"), ("notes", "docs/notes.md")]
    assert found.problems == [] and found.broken == {}


def test_an_empty_file_is_a_docs_project_with_no_sources() -> None:
    found = listing("")
    assert (found.kind, found.sources, found.problems) == ("docs", [], [])


def test_one_bad_entry_fails_that_source_only_and_keeps_its_pages() -> None:
    found = listing("sources:\n  - id: good\n    path: a.md\n  - id: typo\n    pth: b.md\n")
    assert [s.id for s in found.sources] == ["good"]
    assert list(found.broken) == ["typo"]
    assert "its pages are kept until it is fixed" in found.broken["typo"]
    assert found.ids == ["good", "typo"]  # the broken source is still listed, so its pages stay


def test_an_entry_without_a_usable_id_is_never_a_source() -> None:
    found = listing("sources:\n  - path: a.md\n  - id: Not An Id\n    path: b.md\n  - title: no origin\n  - [a, b]\n")
    assert found.sources == []
    assert sorted(found.broken) == ["a", "not-an-id"]  # failed, as the sources they name
    assert len(found.problems) == 2  # they name none
    assert all(p.startswith("kb/shop/sources.yml: source ") for p in found.problems)


def test_a_source_needs_exactly_one_of_path_and_url() -> None:
    found = listing("sources:\n  - id: both\n    path: a.md\n    url: https://example.org/a\n  - id: neither\n")
    assert found.sources == []
    assert all("give exactly one of `path` or `url`" in m for m in found.broken.values())


def test_a_listed_twice_id_keeps_the_first() -> None:
    found = listing("sources:\n  - id: a\n    path: one.md\n  - id: a\n    path: two.md\n")
    assert [s.origin for s in found.sources] == ["one.md"]
    assert found.problems == ["kb/shop/sources.yml: source id 'a' is listed twice; give each source its own id"]


@pytest.mark.parametrize("url, words", [
    ("ftp://example.org/a.pdf", "must start with http://, https:// or file://"),
    ("https://example.org/a file.pdf", "write a space as %20"),
    ("https://example.org:port/a", "is not a valid url"),
    ("https:///a.pdf", "has no host"),
])
def test_a_url_the_fetcher_cannot_download_is_refused_with_what_to_do(url: str, words: str) -> None:
    found = listing(f"sources:\n  - id: web\n    url: \"{url}\"\n")
    assert found.sources == []
    assert words in found.broken["web"]


def test_broken_yaml_or_a_wrong_shape_is_one_line_that_says_what_to_fix() -> None:
    with pytest.raises(SourcesError, match=r"^kb/shop/sources.yml is not valid YAML \(.*\); fix it and build again$"):
        listing("sources: [\n")
    with pytest.raises(SourcesError, match="must be a mapping with a `sources:` list"):
        listing("- id: a\n")
    with pytest.raises(SourcesError, match="kind"):
        listing("kind: novel\nsources: []\n")


def test_a_spec_must_be_written_from_a_requested_view() -> None:
    found = listing("sources: []\nviews:\n  - name: refunds\n    about: refund rules\n"
                    "specs:\n  - name: refund-api\n    view: refunds\n  - name: orphan\n    view: nowhere\n"
                    "  - name: dev\n    view: developer\n")
    assert [s.name for s in found.specs] == ["refund-api", "dev"]  # a default view counts as requested
    assert found.problems == [
        "kb/shop/sources.yml: spec 'orphan' is written from view 'nowhere', which is not requested; "
        "add it with `kbuild view add`"]
    research = listing("kind: research\nspecs:\n  - name: s\n    view: digest\n")
    assert research.specs == [] and "a research project has no specs" in research.problems[0]


def test_a_view_may_not_take_a_default_view_s_name() -> None:
    found = listing("views:\n  - name: digest\n    about: x\n")
    assert found.views == [] and "taken by a default view" in found.problems[0]


def test_the_raw_copy_keeps_a_short_extension_or_bin() -> None:
    assert Source(id="a", path="docs/Guide.PDF").ext == ".pdf"
    assert Source(id="a", url="https://example.org/rfc/rfc9110.txt?x=1").ext == ".txt"
    assert Source(id="a", url="https://example.org/page").ext == ".bin"
    assert Source(id="a", path="notes.a-very-long-one").ext == ".bin"


def test_add_appends_and_keeps_a_person_s_comments_and_order(tmp_path: Path) -> None:
    file = tmp_path / "sources.yml"
    file.write_text("# payments team\ntitle: Payments   # shown on the index\nsources:\n"
                    "  - id: zeta      # first on purpose\n    path: z.md\n")
    add(file, Source(id="alpha", path="a.md"))
    add(file, ViewRequest(name="refunds", about="refund rules"))
    add(file, SpecRequest(name="refund-api", view="refunds"))
    text = file.read_text()
    assert text.startswith("# payments team\ntitle: Payments   # shown on the index\n")
    assert "- id: zeta      # first on purpose" in text
    found = parse(text.encode(), "x")
    assert [s.id for s in found.sources] == ["zeta", "alpha"]
    assert [v.name for v in found.views] == ["refunds"] and [s.name for s in found.specs] == ["refund-api"]


def test_add_creates_the_file_and_refuses_a_name_already_listed(tmp_path: Path) -> None:
    file = tmp_path / "kb/shop/sources.yml"
    add(file, Source(id="a", path="a.md"))
    assert [s.id for s in parse(file.read_bytes(), "x").sources] == ["a"]
    before = file.read_text()
    with pytest.raises(SourcesError, match="already lists source 'a'; choose another name"):
        add(file, Source(id="a", path="other.md"))
    assert file.read_text() == before


def test_add_does_not_write_into_a_broken_file(tmp_path: Path) -> None:
    file = tmp_path / "sources.yml"
    file.write_text("sources: [\n")
    with pytest.raises(SourcesError):
        add(file, Source(id="a", path="a.md"))
    assert file.read_text() == "sources: [\n"


def test_a_local_path_must_stay_inside_the_root_and_be_a_regular_file(tmp_path: Path) -> None:
    root = tmp_path / "root"
    (root / "docs").mkdir(parents=True)
    (root / "docs/a.md").write_text("a")
    (tmp_path / "secret.txt").write_text("s")
    assert resolve_path(root, "docs/a.md") == (root / "docs/a.md").resolve()
    assert resolve_path(root, "docs/missing.md") == (root / "docs/missing.md").resolve()  # the caller reports it
    with pytest.raises(SourcesError, match="leads outside"):
        resolve_path(root, "../secret.txt")
    (root / "docs/link.md").symlink_to(tmp_path / "secret.txt")
    with pytest.raises(SourcesError, match="leads outside"):
        resolve_path(root, "docs/link.md")
    os.mkfifo(root / "docs/pipe")
    with pytest.raises(SourcesError, match="not a regular file"):
        resolve_path(root, "docs/pipe")


def test_a_local_file_over_the_size_limit_is_refused_before_it_is_read(tmp_path: Path, monkeypatch) -> None:
    from kbuild.convert import limits

    (tmp_path / "big.pdf").write_bytes(b"x" * 2048)
    monkeypatch.setattr(limits, "MAX_SOURCE_BYTES", 1024)
    with pytest.raises(SourcesError, match="larger than the 0 MiB limit; split it"):
        resolve_path(tmp_path, "big.pdf")


@pytest.mark.parametrize("entry", ["ie: shipping", "Id: shipping", "id: Shipping", "id: ' shipping'", "path: docs/shipping.md",
                                   "url: https://example.org/docs/shipping"])
def test_an_entry_whose_id_is_mistyped_or_missing_fails_as_the_source_it_names(entry: str) -> None:
    """Not a removal: the entry fails as the source it was meant to be (its id as an id is
    written, else the one `kbuild add` gives its file), so that source keeps its pages."""
    found = listing(f"sources:\n  - id: other\n    path: other.md\n  - {entry}\n")
    assert [s.id for s in found.sources] == ["other"]
    assert list(found.broken) == ["shipping"] and found.problems == []
    assert found.broken["shipping"].startswith("kb/shop/sources.yml: source shipping: ")
    assert found.ids == ["other", "shipping"]


def test_a_mistyped_entry_never_takes_the_place_of_a_valid_one() -> None:
    found = listing("sources:\n  - id: Shipping\n    path: a.md\n  - id: shipping\n    path: b.md\n")
    assert [s.id for s in found.sources] == ["shipping"] and found.broken == {}
    assert len(found.problems) == 1 and "'Shipping'" in found.problems[0]
