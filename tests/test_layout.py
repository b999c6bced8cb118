"""Links between store pages: `link` gives what posixpath.relpath gives, for every path."""
from __future__ import annotations

from posixpath import relpath

from hypothesis import given, settings
from hypothesis import strategies as st

from kbuild.store.layout import link

PART = st.sampled_from(["kb", "p", "facts", "views", "x.md", "index.md", ".", "..", ""])
PATH = st.lists(PART, min_size=1, max_size=6).map("/".join)


def _outcome(compute):
    try:
        return compute()
    except ValueError as exc:  # relpath's own refusal of an empty path
        return ("refused", str(exc))


@settings(max_examples=2000, deadline=None)
@given(PATH, PATH)
def test_a_link_between_pages_is_the_relative_path_relpath_gives(page, to):
    start = page.rsplit("/", 1)[0] if "/" in page else "."
    assert _outcome(lambda: link(page, to)) == _outcome(lambda: relpath(to, start=start))


def test_a_view_links_to_a_fact_up_and_across_folders():
    assert link("kb/p/artifacts/views/digest.md", "kb/p/facts/rfc/retry.md") == "../../facts/rfc/retry.md"
    assert link("kb/p/facts/rfc/index.md", "kb/p/facts/rfc/retry.md") == "retry.md"
    assert link("kb/p/facts/rfc/index.md", "kb/p/facts/rfc") == "."
