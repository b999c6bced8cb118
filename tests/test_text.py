"""The shared text vocabulary (kbuild/text/): what every reader of text agrees a heading, a
keyword, a table and a ranking are."""
from __future__ import annotations

import json

import pytest

from kbuild.text.keywords import KEYWORD
from kbuild.text.markdown import LIST_ITEM, PAGE_MARKER, markdown_table, page_marker, visible_text
from kbuild.text.prose import clean, prose_sentences
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
        "| Name | Note |\n|---|---|\n| a\\|b | two lines |\n| short |  |")
    assert markdown_table([[None, ""]]) == ""


def test_a_quote_over_several_lines_reads_as_its_words_without_its_marks():
    """A quote's lines were joined with their marks: "> A quote over > two lines." in a fact's
    rewrite and as a view's statement."""
    quote = "> Store the key apart\n> from the data.\n>\n> Rotate it\n>> every 90 days.\n"
    assert clean(quote) == "> Store the key apart from the data.\n\n> Rotate it every 90 days."
    assert prose_sentences(quote) == ["> Store the key apart from the data.", "> Rotate it every 90 days."]


def test_ranking_needs_a_shared_word_and_breaks_ties_in_order():
    documents = ["refunds are requested by mail", "payments by card", "a refund request", "unrelated",
                 "reports at six", "cards and fees", "the daily schedule"]
    ranked = rank(documents, "refund requests")
    assert [i for i, _ in ranked] == [2, 0]
    assert rank(documents, "kubernetes") == [] and rank([], "refund") == []


def test_a_word_in_half_the_documents_still_finds_them():
    """rank-bm25's idf was 0 for a word in half the documents (and below 0 above half): a store of
    two index lines found nothing for a word of one of them."""
    assert [i for i, _ in rank(["refund policy", "shop hours"], "refund")] == [0]
    assert [i for i, _ in rank(["a refund", "the refund fee", "shop hours"], "refund")] == [0, 1]


def test_the_search_index_is_the_one_bm25s_writes_from_the_same_words(tmp_path):
    """build_index merges sources' term counts and scores them in NumPy instead of handing
    bm25s every token: the files it writes must be the ones bm25s writes itself from the same
    words, byte for byte, so search ranks as before."""
    import random

    import bm25s
    from bm25s.tokenization import Tokenized

    from kbuild.text.ranking import B, INDEX_FILES, K1, SectionIndex, build_index, segment

    rng = random.Random(7)
    words = [f"w{n}" for n in range(400)]
    documents = [{w: rng.randint(1, 6) for w in rng.sample(words, rng.randint(1, 40))} for _ in range(300)]
    documents.append({"_": 1})  # a section with no words, as the search index writes it
    vocabulary = {term: n for n, term in enumerate(sorted({t for d in documents for t in d}))}
    stock = bm25s.BM25(k1=K1, b=B)
    stock.index(Tokenized(ids=[[vocabulary[t] for t in sorted(d) for _ in range(d[t])] for d in documents],
                          vocab=vocabulary), show_progress=False, leave_progress=False)
    stock.save(tmp_path / "stock")
    written = build_index([segment(documents[:120]), segment(documents[120:])])  # as sources make them
    stock_files = {name: (tmp_path / "stock" / name).read_bytes() for name in INDEX_FILES}
    # the JSON files as JSON: bm25s spells its vocabulary with orjson where that is installed
    assert {n: d for n, d in stock_files.items() if not n.endswith(".json")} == {
        n: d for n, d in written.items() if not n.endswith(".json")}
    assert stock_files["params.index.json"] == written["params.index.json"]
    assert list(json.loads(stock_files["vocab.index.json"]).items()) == list(json.loads(written["vocab.index.json"]).items())
    (tmp_path / "ours").mkdir()
    for name, data in written.items():
        (tmp_path / "ours" / name).write_bytes(data)
    best = SectionIndex(tmp_path / "ours").ranked({"w3": 1.0, "w17": 1.0})
    assert best and all("w3" in documents[n] or "w17" in documents[n] for n, _, _ in best)


def test_the_search_index_is_spelled_alike_with_or_without_orjson(monkeypatch):
    """bm25s writes its vocabulary with orjson when another package installed it (no spaces), and
    with json otherwise: the files a build writes, and commits, are the same on both machines."""
    import json as stdlib_json

    from bm25s.utils import json_functions

    from kbuild.text.ranking import build_index, segment

    segments = [segment([{"refund": 2, "window": 1}, {"caf\u00e9": 1, "_": 1}])]
    without = build_index(segments)
    monkeypatch.setattr(json_functions, "dumps", lambda d, **_: stdlib_json.dumps(d, separators=(",", ":"),
                                                                                   ensure_ascii=False))
    assert build_index(segments) == without
    assert without["vocab.index.json"].startswith(b'{"_": 0, ')


def test_the_postings_are_put_in_bm25s_order_by_a_sort_of_their_terms():
    """by_term gives what bm25s's own CSC builder gives, for documents in order that hold each
    term once: the index files are the ones bm25s writes whatever the vocabulary's size."""
    import bm25s
    import numpy as np

    from kbuild.text.ranking import by_term

    rng = np.random.default_rng(3)
    for vocabulary in (1, 400, 65_535):
        per_document = [np.sort(rng.choice(vocabulary, size=rng.integers(1, min(vocabulary, 30) + 1), replace=False))
                        for _ in range(200)]
        terms = np.concatenate(per_document).astype(np.int32)
        documents = np.repeat(np.arange(200, dtype=np.int32), [len(d) for d in per_document])
        scores = rng.random(len(terms), dtype=np.float32)
        ours = by_term(scores, documents, terms, vocabulary)
        theirs = bm25s.BM25._np_csc(data=scores, rows=documents, cols=terms, shape=(200, vocabulary))
        assert all(a.dtype == b.dtype and np.array_equal(a, b) for a, b in zip(ours, theirs)), vocabulary
