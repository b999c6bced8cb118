"""Which sentences of a view a spec makes requirements of, and how it says to test them (kbuild.text.obligations)."""
from __future__ import annotations

import pytest

from kbuild.model.offline import select_requirements
from kbuild.text.obligations import acceptance_failures, normative_keyword, plain_obligations, requirement, with_lead_in


@pytest.mark.parametrize("sentence, keyword", [
    ("Refunds MUST be requested within 90 days of the payment.", "MUST"),
    ("A single payment MUST NOT exceed 10,000 EUR.", "MUST NOT"),
    ("Clients MAY cache the token.", "MAY"),
    ("This mode is NOT RECOMMENDED for production.", "NOT RECOMMENDED"),
    ("The verifier MUST time out a one-time passcode after 10 minutes;", "MUST"),
    # not requirements: lower case (RFC 8174), the keywords' own definitions, a condition bullet
    ("Refunds must be requested within 90 days.", None),
    ("SHOULD This word, or the adjective \"RECOMMENDED\", mean that there may exist valid reasons.", None),
    ("The key words \"MUST\", \"SHALL\" and \"MAY\" in this document are to be interpreted as in RFC 2119.", None),
    ("Use one-time passcodes when: the device MUST NOT have a keyboard.", None),
    ("When to use this: the client SHOULD be a browser.", None),
])
def test_a_requirement_carries_a_keyword_used_as_one(sentence, keyword):
    assert normative_keyword(sentence) == keyword


def test_a_list_item_takes_its_lead_ins_subject():
    assert with_lead_in("The server MUST:", "time out after 5 minutes.") == "The server MUST time out after 5 minutes."
    assert with_lead_in("Imports should be grouped in the following order:", "Standard library imports.") == \
        "Imports should be grouped in the following order: Standard library imports."


def test_an_acceptance_criterion_says_how_to_test_not_what_was_said():
    req = requirement("If the code is expired, the server SHALL reject it within 5 seconds.")
    assert req is not None and req.keyword == "SHALL"
    assert req.acceptance.startswith("Given the server; when the code is expired")
    assert "then a test passes only if the server can be seen to reject it within 5 seconds" in req.acceptance
    assert "(at 5 seconds it holds; at 6 seconds it fails)" in req.acceptance
    assert acceptance_failures(req.statement, req.acceptance) == []

    floor = requirement("Passwords MUST be at least 12 characters long.")
    assert "(at 12 characters it holds; at 11 characters it fails)" in floor.acceptance
    never = requirement("A single payment MUST NOT exceed 10,000 EUR.")
    assert "can be seen never to exceed 10,000 EUR" in never.acceptance
    # a condition keeps its own word: "when unless otherwise specified" said nothing (NIST SP 800-63B's wording)
    unless = requirement("Unless otherwise specified in the description of a given authenticator, the verifier SHALL "
                         "limit consecutive failed authentication attempts on a single subscriber account to no more than 100.")
    assert unless.acceptance.startswith("Given the verifier; unless otherwise specified in the description of a given "
                                        "authenticator, at each limit; then"), unless.acceptance
    assert "(at 100 it holds; at 101 it fails)" in unless.acceptance
    # a limit written as a word is tested at its edge like any (NIST writes its small limits so)
    words = requirement("Verifiers SHALL require passwords to be a minimum of eight characters in length.")
    assert "(at 8 characters it holds; at 7 characters it fails)" in words.acceptance
    assert acceptance_failures(words.statement, words.acceptance) == []
    assert acceptance_failures(words.statement, "Given a new password, when it has eight characters and when it "
                                                "has seven characters, then only the first is accepted.") == []


def test_a_model_acceptance_that_restates_or_drops_a_limit_is_refused():
    statement = "Refunds MUST be requested within 90 days of the payment."
    assert acceptance_failures(statement, f"A review shows that this holds: \"{statement}\"")
    assert acceptance_failures(statement, "Given a payment, when a refund is requested late, then it is refused.") == \
        ["does not test its limit 90 days"]
    assert acceptance_failures(statement, "Given a payment, when a refund is requested at 90 and at 91, then only "
                                          "the first is accepted.") == ["tests 90 days without the unit; name it with each value"]


def test_the_offline_spec_holds_only_requirements_each_with_its_test():
    statements = [{"text": t, "cites": [f"std/f{n}"]} for n, t in enumerate([
        "SHOULD This word, or the adjective \"RECOMMENDED\", mean that there may exist valid reasons.",
        "A one-time passcode is a short code sent to a device the user holds.",
        "The verifier MUST time out a one-time passcode after 10 minutes;",
        "Use one-time passcodes when: the user SHOULD have no authenticator app.",
        "The verifier MUST accept each one-time passcode once only.",
    ])]
    found = select_requirements(statements)
    assert [r["statement"] for r in found] == ["The verifier MUST time out a one-time passcode after 10 minutes;",
                                              "The verifier MUST accept each one-time passcode once only."]
    assert [r["cites"] for r in found] == [["std/f2"], ["std/f4"]]
    assert all(r["acceptance"].startswith("Given the verifier;") and r["statement"] not in r["acceptance"]
               for r in found)


def test_two_obligations_in_one_sentence_are_each_tested_at_their_own_strength():
    """anchored-headings.md's 4.2.1: "SHOULD wait ... and MUST NOT retry more than 5 times" gave
    one Then, at SHOULD's strength, with "MUST NOT" inside it and 5 tested as a floor."""
    req = requirement("A client SHOULD wait at least 2 seconds before its first retry and MUST NOT retry more "
                      "than 5 times in one minute.")
    assert req.keyword == "SHOULD"
    assert ("then a test passes if a client can be seen to wait at least 2 seconds before its first retry, "
            "or the case is a documented exception; and a test passes only if a client can be seen never to "
            "retry more than 5 times in one minute") in req.acceptance
    assert "MUST" not in req.acceptance
    assert "(at 2 seconds it holds; at 1 second it fails) and (at 5 times it holds; at 6 times it fails)" \
        in req.acceptance  # "not more than" is a ceiling
    assert acceptance_failures(req.statement, req.acceptance) == []


# A guide written without RFC 2119's capitals (the OWASP cheat sheets, most READMEs) states its
# rules in plain English; RFC 8174 leaves lower case to its ordinary meaning, which obliges too.
PLAIN_GUIDE = [
    "The counter of failed logins should be associated with the account itself, not the source IP address.",
    "Passwords must be at least 8 characters long.",
    "Sessions should not be kept open for more than 30 minutes of inactivity.",
    "It should be noted that this does not constitute multi-factor authentication.",
    "An attacker must first obtain a valid session token.",
    "Should the vault go down, break-glass accounts keep access.",
    "Which algorithm should we use?",
    "Clients may cache the token.",
    "This should help with slow connections.",
    "The key must have been leaked before the outage.",
    "There are a number of factors that should be considered when implementing a lockout policy.",
]


@pytest.mark.parametrize("sentence, keyword", [
    (PLAIN_GUIDE[0], "SHOULD"), (PLAIN_GUIDE[1], "MUST"), (PLAIN_GUIDE[2], "SHOULD NOT"),
    *[(sentence, None) for sentence in PLAIN_GUIDE[3:]],  # an aside, an attacker's lot, a condition, a question,
    # "may" (a possibility more often than a permission), an expectation, an inference, what merely exists
])
def test_a_text_without_capital_keywords_obliges_in_plain_english(sentence, keyword):
    assert normative_keyword(sentence, plain=True) == keyword
    assert normative_keyword(sentence) is None  # where a text writes its keywords in capitals, lower case is English


def test_plain_english_counts_only_where_no_statement_writes_a_keyword_in_capitals():
    assert plain_obligations(PLAIN_GUIDE)
    assert not plain_obligations([*PLAIN_GUIDE, "Refunds MUST be requested within 90 days."])
    assert not plain_obligations(["The sky is blue."])  # nothing obliges in either case: no plain English to read

    found = select_requirements([{"text": t, "cites": [f"guide/f{n}"]} for n, t in enumerate(PLAIN_GUIDE)])
    assert [r["statement"] for r in found] == PLAIN_GUIDE[:3]  # the words as written, never recased
    limit = found[1]["acceptance"]
    assert limit.startswith("Given passwords;") and "then a test passes only if passwords can be seen to be at " \
        "least 8 characters long" in limit and "(at 8 characters it holds; at 7 characters it fails)" in limit
    assert "can be seen not to be kept open for more than 30 minutes" in found[2]["acceptance"]
    assert all(acceptance_failures(r["statement"], r["acceptance"]) == [] for r in found)
    mixed = select_requirements([{"text": t, "cites": ["std/f"]} for t in
                                 [*PLAIN_GUIDE, "Refunds MUST be requested within 90 days."]])
    assert [r["statement"] for r in mixed] == ["Refunds MUST be requested within 90 days."]
