"""Code checks of written text against its sources: what is refused, passed or left to the model."""
from __future__ import annotations

from kbuild.checks.grounding import sentences_of, triage, unsupported

SOURCE = ("A customer SHOULD request a refund within 90 days. The `refund_window` setting holds the limit. "
          "Refunds are paid to the card used for the purchase.")


def test_a_number_keyword_identifier_or_quote_the_sources_lack_is_unsupported() -> None:
    assert unsupported("A customer SHOULD request a refund within 90 days.", [SOURCE]) == []
    assert unsupported("A customer MUST request a refund within 30 days.", [SOURCE]) == ["30", "MUST"]
    assert unsupported("Set `refund_limit` to change it.", [SOURCE]) == ["`refund_limit`"]
    assert unsupported('The "grace period" applies.', [SOURCE]) == ['"grace period"']
    assert unsupported("The `refund_window` setting holds it, *90* days.", [SOURCE]) == []  # marks do not matter


def test_triage_refuses_hard_facts_passes_restatements_and_doubts_the_rest() -> None:
    text = ("A customer SHOULD request a refund within 90 days. "
            "A customer MUST request a refund within 30 days. "
            "Refunds are paid to the card used for the purchase. "
            "Refunds are never paid to the card used for the purchase.")
    result = triage(text, [SOURCE])
    assert [s for s, _ in result.refused] == ["A customer MUST request a refund within 30 days."]
    assert "30, MUST" in result.refused[0][1]
    assert result.passed == 2
    assert [d.sentence for d in result.doubts] == ["Refunds are never paid to the card used for the purchase."]
    doubt = result.doubts[0]
    assert "never" in doubt.why
    assert doubt.evidence[0] == "Refunds are paid to the card used for the purchase."  # closest source first


def test_dropping_a_force_word_of_the_restated_sentence_is_a_doubt() -> None:
    result = triage("Refunds are paid to the card.", ["Refunds are only paid to the card."])
    assert result.passed == 0 and "drops force words" in result.doubts[0].why


def test_a_title_may_be_named_without_a_source_sentence_saying_it() -> None:
    assert triage("Payments Handbook covers refunds.", ["It covers refunds."], framing="Payments Handbook").passed == 1


def test_a_code_block_passes_only_when_a_source_holds_it_as_it_stands() -> None:
    source = "Run this:\n\n```\nmake refund\n```\n"
    assert triage("Run this:\n\n```sh\nmake refund\n```\n", [source]).doubts == ()
    changed = triage("Run this:\n\n```sh\nmake refund --force\n```\n", [source])
    assert [d.sentence for d in changed.doubts] == ["make refund --force"]


def test_sentences_keep_code_and_quotes_and_drop_link_targets() -> None:
    found = sentences_of("# Title\n\nSee [the terms](terms.md) for `refund_window`. It says \"no\".")
    assert found == ["Title", "See the terms for `refund_window`.", 'It says "no".']
