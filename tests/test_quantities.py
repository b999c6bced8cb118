"""Limits in sentences: each number with its unit and what the sentence allows of it, and the
numbers that are no limit (kbuild.text.quantities). Sentences from tests/data where they exist."""
from __future__ import annotations

import pytest

from kbuild.text.quantities import Comparison, quantities

AT_MOST, AT_LEAST, LESS, MORE, AFTER = (Comparison.AT_MOST, Comparison.AT_LEAST, Comparison.LESS_THAN,
                                        Comparison.MORE_THAN, Comparison.AFTER)


@pytest.mark.parametrize("sentence, found", [
    # the issue's: "at 5 working it holds" cut the unit
    ("Password reset links SHALL expire within 5 working days.", [("5", "working days", AT_MOST)]),
    ("Passwords MUST be at least 12 characters long.", [("12", "characters", AT_LEAST)]),
    ("Sessions MUST time out after 30 minutes of inactivity.", [("30", "minutes", AFTER)]),
    ("The service MUST lock an account after 5 failed login attempts.", [("5", "failed login attempts", AFTER)]),
    # tests/data/anchored-headings.md 4.1.2 and 4.2.1
    ("A token SHALL expire 15 minutes after it was issued.", [("15", "minutes", AFTER)]),
    ("A client SHOULD wait at least 2 seconds before its first retry and MUST NOT retry more than 5 times in "
     "one minute.", [("2", "seconds", AT_LEAST), ("5", "times", AT_MOST)]),
    # PEP 8 (tests/data/corpus/pep-0008.rst)
    ("Limit all lines to a maximum of 79 characters.", [("79", "characters", AT_MOST)]),
    ("it is okay to increase the line length limit up to 99 characters", [("99", "characters", AT_MOST)]),
    # OWASP Java Security Cheat Sheet (tests/data/wild/owasp)
    ("and limit the size of strings to 500 bytes using the maxStringLength configuration attribute",
     [("500", "bytes", AT_MOST)]),
    ("A single payment MUST NOT exceed 10,000 EUR.", [("10,000", "EUR", AT_MOST)]),
    ("Payments above 1,000 EUR SHOULD be confirmed by the customer.", [("1,000", "EUR", MORE)]),
    ("The API MUST accept no more than 100 requests per minute.", [("100", "requests per minute", AT_MOST)]),
    ("Uptime SHOULD be at least 99.9%.", [("99.9", "%", AT_LEAST)]),
    # OWASP Cryptographic Storage Cheat Sheet, emphasis and all
    ("If RSA must be used, then ensure that the key is at least **2048 bits**.", [("2048", "bits", AT_LEAST)]),
    ("a deployment with severity score of 7 or greater should be moved up", [("7", "", AT_LEAST)]),
    ("Responses MUST arrive in less than 200 ms.", [("200", "ms", LESS)]),
    ("Passwords MUST be between 8 and 64 characters.", [("8", "characters", AT_LEAST), ("64", "characters", AT_MOST)]),
    ("Passwords MUST be 8-64 characters long.", [("8", "characters", None), ("64", "characters", None)]),  # a range, no name
    ("It SHOULD limit attempts to 5 per passcode.", [("5", "per passcode", AT_MOST)]),
    # a standard writes its small limits as words (NIST's style: "a minimum of eight characters")
    ("Verifiers SHALL require passwords to be a minimum of eight characters in length and SHOULD require a "
     "minimum of 15 characters.", [("8", "characters", AT_LEAST), ("15", "characters", AT_LEAST)]),
    ("Look-up secrets SHALL be at least six decimal digits in length.", [("6", "decimal digits", AT_LEAST)]),
    ("A password SHALL hold at least one uppercase letter.", [("1", "uppercase letter", AT_LEAST)]),
    # ... and a word that counts nothing, or is half of a number, is no limit
    ("One of the two factors SHALL be something you have.", []),
    ("Authentication SHALL use at least two authentication factors.", []),
    ("Verifiers SHALL allow no more than one hundred attempts.", []),
    ("Sessions SHALL end within twenty-four hours.", []),
])
def test_a_number_keeps_its_unit_and_its_comparison(sentence, found):
    assert [(q.written, q.unit, q.comparison) for q in quantities(sentence)] == found


@pytest.mark.parametrize("sentence", [
    "5.1 Session handling Sessions MUST time out after 30 minutes of inactivity.",
    "See Section 4 for resets; as § 3.2 says, uploads MUST NOT exceed 30 MB.",
    "Clients MUST follow RFC 6585 and the rules of 4.2.1 for 30 seconds.",
    "Keys MUST use AES-256 and TLS 1.2 or higher, and be rotated every 30 days.",
    "as described in 5.1, a request over the rate limit MUST return status 429 for 30 seconds.",
    # OWASP XSS Filter Evasion Cheat Sheet
    "Please see RFC 2397 for more details; wait 30 minutes.",
    "Launched in May 2013, the scanner SHOULD run for 30 minutes.",
    # a standard's name in parts ("63B" read as 63 bytes, "800-63-4" as 63 and 4): one per style
    "Verifiers SHALL follow SP 800-63B and wait 30 minutes.",
    "Maximum password length should be at least 30 characters (NIST SP800-63B).",
    "See NIST SP 800-63-4; modules SHALL be validated to FIPS 140-3 within 30 days.",
    "Per ISO/IEC 19795-1:2021, the test SHALL last 30 minutes.",
    "OAuth 2.0 tokens and Python 3.11 builds SHALL expire after 30 minutes.",
])
def test_a_section_number_standard_or_code_is_no_limit(sentence):
    assert [q.written for q in quantities(sentence)] == ["30"]


@pytest.mark.parametrize("sentence, edge", [
    ("Password reset links SHALL expire within 5 working days.", "at 5 working days it holds; at 6 working days it fails"),
    ("Passwords MUST be at least 12 characters long.", "at 12 characters it holds; at 11 characters it fails"),
    ("Tokens MUST expire within 1 hour.", "at 1 hour it holds; at 2 hours it fails"),
    ("A client SHOULD wait at least 2 seconds.", "at 2 seconds it holds; at 1 second it fails"),
    ("Responses MUST arrive in less than 0.5 seconds.", "at 0.4 seconds it holds; at 0.5 seconds it fails"),
    ("Passwords MUST be longer than 8 characters.", "at 9 characters it holds; at 8 characters it fails"),
    ("A single payment MUST NOT exceed 10,000 EUR.", "at 10,000 EUR it holds; at 10,001 EUR it fails"),
    ("The fee MUST NOT exceed $500.", "at $500 it holds; at $501 it fails"),
    ("The API MUST accept no more than 100 requests per minute.",
     "at 100 requests per minute it holds; at 101 requests per minute it fails"),
    ("Sessions MUST time out after 30 minutes of inactivity.",
     "at 29 minutes it does not apply yet; at 30 minutes it applies"),
])
def test_the_edge_of_a_limit_is_tested_on_both_sides_with_its_unit(sentence, edge):
    assert quantities(sentence)[0].edge() == edge
