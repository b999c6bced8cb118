"""The meaning check that decides whether a rebuilt page stops a rebuild climbing: it must never
call a change of meaning "same"."""
from __future__ import annotations

import asyncio

import pytest

from kbuild.checks.meaning import classify, classify_text

OLD = "A customer MUST request a refund within 30 days. See [terms](terms.md) and `refund_window`."


@pytest.mark.parametrize("new", [
    OLD.replace("30", "60"),
    OLD.replace("MUST", "SHOULD"),
    OLD.replace("MUST request", "MUST not request"),
    OLD.replace("terms.md", "other.md"),
    OLD.replace("refund_window", "refund_delay"),
])
def test_a_changed_number_keyword_negation_link_or_identifier_is_never_the_same(new: str) -> None:
    decision = classify_text(OLD, new)
    assert not decision.same and decision.stage == "guard"


def test_formatting_and_white_space_alone_are_the_same() -> None:
    decision = classify_text("# Refunds\n\nA **refund** is paid.", "Refunds A refund   is *paid*.")
    assert decision.same and decision.stage == "exact"


def test_a_typo_fix_is_the_same_and_another_word_is_not() -> None:
    assert classify_text("Refunds are recieved by the bank.", "Refunds are received by the bank.").same
    changed = classify_text("Refunds are received by the bank.", "Refunds are rejected by the bank.")
    assert not changed.same and changed.stage == "edit"
    reversed_ = classify_text("The bank pays the customer.", "The customer pays the bank.")
    assert not reversed_.same


class Backend:
    def __init__(self, p: float, from_logprobs: bool = True) -> None:
        self.answer = (p, from_logprobs)
        self.asked = 0

    async def yes_probability(self, ctx: object, task: str, question: str, context: str) -> tuple[float, bool]:
        self.asked += 1
        return self.answer


def test_the_model_is_asked_only_where_code_cannot_decide_and_must_be_sure() -> None:
    old, new = "Refunds are paid by the bank.", "The bank pays refunds."
    sure, unsure, bare = Backend(0.995), Backend(0.9), Backend(1.0, from_logprobs=False)
    assert asyncio.run(classify(None, old, new, sure)).same
    assert not asyncio.run(classify(None, old, new, unsure)).same
    assert not asyncio.run(classify(None, old, new, bare)).same  # a "yes" without logprobs is no evidence
    guarded = Backend(1.0)
    assert not asyncio.run(classify(None, OLD, OLD.replace("30", "60"), guarded)).same
    assert guarded.asked == 0  # a guard decides for free
    assert not asyncio.run(classify(None, old, new, None)).same  # without a model: different
