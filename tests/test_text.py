"""The shared text vocabulary (kbuild/text/): what every reader of text agrees a heading, a
keyword, a table and a ranking are."""
from __future__ import annotations

import pytest

from kbuild.text.keywords import KEYWORD
from kbuild.text.markdown import LIST_ITEM, PAGE_MARKER, markdown_table, page_marker, visible_text
from kbuild.text.ranking import rank
from kbuild.text.slugs import slug


@pytest.mark.parametrize("title, seen", [
    ('<a name="retry"></a> 4.2.1 Retry Limits', "4.2.1 Retry Limits"),
    ("Errors &amp; Messages &mdash; Overview", "Errors & Messages \u2014 Overview"),
    ("**Bold**, *emphasis*, `code` and [a link](https://example.com)", "Bold, emphasis, code and a link"),
    ('<span class="x">Wrapped</span>   words', "Wrapped words"),
    ("Plain words", "Plain words"),
])
def test_a_heading_is_the_text_a_reader_sees(title, seen):
    assert visible_text(title) == seen


def test_slugs_end_where_a_word_ends():
    assert slug("4.2.1 Retry Limits") == "4-2-1-retry-limits"
    assert slug("Why not use importlib.util.LazyLoader instead of the new keyword") == \
        "why-not-use-importlib-util-lazyloader-instead"
    assert slug("Retry limits for remote authentication of service accounts") == \
        "retry-limits-for-remote-authentication"  # not "...-of"
    assert slug("???") == "part"


def test_keywords_keep_their_negation():
    found = KEYWORD.findall("A client MUST NOT retry; it SHOULD wait and MAY log. It must not be MUSTARD.")
    assert found == ["MUST NOT", "SHOULD", "MAY"]


def test_list_items_and_page_markers():
    assert LIST_ITEM.sub("", "  - an item") == "an item" and LIST_ITEM.sub("", "12) twelfth") == "twelfth"
    assert not LIST_ITEM.match("-not a list item") and not LIST_ITEM.match("2024. A year.")
    assert PAGE_MARKER.match(page_marker(12)).group(1) == "12"


def test_a_table_keeps_each_cell_in_its_column():
    assert markdown_table([["Name", "Note"], ["a|b", "two\nlines"], ["", None], ["short"]]) == (
        "| Name | Note |\n|---|---|\n| a\\|b | two<br>lines |\n| short |  |")
    assert markdown_table([[None, ""]]) == ""


def test_ranking_needs_a_shared_word_and_breaks_ties_in_order():
    documents = ["refunds are requested by mail", "payments by card", "a refund request", "unrelated",
                 "reports at six", "cards and fees", "the daily schedule"]
    ranked = rank(documents, "refund requests")
    assert [i for i, _ in ranked] == [2, 0]
    assert rank(documents, "kubernetes") == [] and rank([], "refund") == []
