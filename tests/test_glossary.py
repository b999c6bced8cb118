"""The glossary: the terms a source defines (kbuild.text.definitions), each project's page of
them (rules/glossary.py), and a question in the reader's words taken into the source's
(kbuild.retrieval.expansion) by search and context."""
from __future__ import annotations

import json
from pathlib import Path

import pytest
from conftest import kbuild

from kbuild.retrieval.expansion import GlossaryTerm, SameWords, expand
from kbuild.text.definitions import definitions

DATA = Path(__file__).parent / "data"


def found(text: str) -> list[tuple[str, str, str]]:
    return [(d.term, d.means, d.kind) for d in definitions(text)]


@pytest.mark.parametrize("sentence, expected", [
    # OWASP's cheat sheets, as written
    ("Cross-Site Scripting (XSS) is a misnomer.", ("XSS", "Cross-Site Scripting", "acronym")),
    ("Multi-Factor Authentication (MFA) adds a layer.", ("MFA", "Multi-Factor Authentication", "acronym")),
    ("Role-based access control (RBAC) is a method.", ("RBAC", "Role-based access control", "acronym")),
    ("An XML eXternal Entity (XXE) attack.", ("XXE", "XML eXternal Entity", "acronym")),
    ("Use Web Application Firewalls (WAFs) with care.", ("WAF", "Web Application Firewalls", "acronym")),
    ("The DOM (Document Object Model) is a tree.", ("DOM", "Document Object Model", "acronym")),
    ("When authorizations are tested, the logical roles are sometimes called a **Point Of View**.",
     ("Point Of View", "logical roles", "alias")),
    ("A Kubernetes cluster consists of a set of worker machines, called nodes that run containerized applications.",
     ("nodes", "worker machines", "alias")),
    ("Time-based one-time passwords, commonly referred to as TOTP codes, expire.",
     ("TOTP codes", "Time-based one-time passwords", "alias")),
    ('The Open Web Application Security Project (hereafter "OWASP") publishes them.',
     ("OWASP", "Open Web Application Security Project", "alias")),
    ("A nonce is defined as a number used once.", ("nonce", "a number used once", "meaning")),
    # a name set off by dashes, as NIST's SP 800-63B writes it, or given again in brackets
    ("A memorized secret authenticator — commonly referred to as a password or, if numeric, a PIN — is a "
     "secret value.", ("password", "memorized secret authenticator", "alias")),
    ("Once established, the session ID (or token) is equivalent to the strongest method.",
     ("token", "session ID", "alias")),
    ("The session hijacking (or sidejacking) attacks follow.", ("sidejacking", "session hijacking", "alias")),
    ("The subscriber (i.e., the user) must be notified.", ("user", "subscriber", "alias")),
    # OWASP's OAuth 2.0 sheet: a remark after the acronym, a small word in the name it spells
    ('Proof Key for Code Exchange (PKCE, pronounced "pixy") is the technique used.',
     ("PKCE", "Proof Key for Code Exchange", "acronym")),
    ("The Department of Defense (DoD) wrote it.", ("DoD", "Department of Defense", "acronym")),
    # the DOM based XSS sheet's first sentence: a lead-in to a list defines as well as any
    (("When looking at XSS (Cross-Site Scripting), there are three generally recognized forms of XSS:\n\n"
      "- Reflected or Stored\n- DOM Based XSS."), ("XSS", "Cross-Site Scripting", "acronym")),
    # "Y (X)": one common noun, another in bare brackets (the Multi-Tenant and Ruby on Rails sheets)
    ("Multi-tenant applications serve multiple customers (tenants) from a shared infrastructure.",
     ("tenants", "customers", "alias")),
    ("Rails uses third-party libraries (gems) for most things.", ("gems", "libraries", "alias")),
    # a term a standard renames, or names for its own use
    ("Memorized secrets are now referred to as passwords.", ("passwords", "Memorized secrets", "alias")),
    ("The credential service provider, referred to in this document as the CSP, issues them.",
     ("CSP", "credential service provider", "alias")),
    ("Look-up secrets (formerly grid cards) are printed once.", ("grid cards", "Look-up secrets", "alias")),
    # Wikipedia's article on Microsoft (a document the glossary was not written on)
    ("The corporate headquarters, informally known as the Microsoft Redmond campus, is located at One Microsoft Way.",
     ("Microsoft Redmond campus", "corporate headquarters", "alias")),
])
def test_the_terms_a_sentence_defines(sentence, expected):
    assert expected in found(sentence)


@pytest.mark.parametrize("sentence", [
    "This means that the value is escaped.",  # a clause, no term
    "See the section (Note) below.",  # a word in brackets, no acronym
    "The primary means of input validation for free-form text input should be:",  # a lead-in, cut off
    "Server Side Includes (SSI) and Trident (IE) differ.",  # IE is no initials of Trident
    "what developers have defined, also known as named property accesses",  # a verb, not a name
    # OWASP's Session Management sheet: the attacks are known as that, not the domain
    "Setting the Domain attribute to a too permissive value allows an attacker to launch attacks on the session "
    "IDs between different hosts belonging to the same domain, known as cross-subdomain cookies.",
])
def test_no_term_where_none_is_defined(sentence):
    assert all(term not in {"IE", "Note", "named property accesses", "cross-subdomain cookies"}
               for term, _, _ in found(sentence))
    assert not [f for f in found(sentence) if f[2] == "meaning"]


@pytest.mark.parametrize("sentence", [
    "Gates called MITS and claimed that he had a working interpreter.",  # a verb
    "Use TLS 1.2 (or later) everywhere.",  # "(or Y)" that is no name
    "Run 10,000 iterations (recommended) and keep the time (international format).",  # a remark in brackets
    "Kubernetes (recommended) runs it; the header is used (sparingly) by browsers (source).",
    "Run the tests (or the linter) before you push.",  # another thing, not another name
    "If the previous key is known (or suspected) to have been compromised.",  # a quality, and another
    "Provide an empty (or invalid) value for the session ID.",
    "Ruby on Rails is often used with an ORM called ActiveRecord.",  # one ORM, not another name for ORMs
    "Microsoft released two projects called Microsoft AccountGuard and Defending Democracy.",
    "NASA worked with Microsoft to develop an AI-driven customer copilot, called Earth Copilot, which simplifies it.",
    "People end up dependent on them, a process is known as vendor lock-in.",  # one process of the kind
])
def test_a_thing_called_by_its_own_name_is_no_other_name_of_its_kind(sentence):
    assert [f for f in found(sentence) if f[2] == "alias"] == []


def test_the_owasp_kubernetes_sheet_defines_its_acronyms():
    text = (DATA / "wild/owasp/Kubernetes_Security_Cheat_Sheet.md").read_text()
    acronyms = {term: means for term, means, kind in found(text) if kind == "acronym"}
    assert acronyms["MFA"] == "Multi-Factor Authentication"
    assert acronyms["RBAC"] == "Role-based access control"
    assert acronyms["CNCF"] == "Cloud Native Computing Foundation"


def term(short: str, long: str, kind: str = "acronym") -> GlossaryTerm:
    return GlossaryTerm(term=short, means=long, kind=kind, sentence=f"{long} ({short}).", cites=["s/f"])


def test_a_question_asks_for_the_other_name_of_each_term_it_names():
    glossary = [term("MFA", "Multi-Factor Authentication"), term("IT", "Information Technology"),
                term("nonce", "a number used once", "meaning")]
    assert expand("how do MFA devices work?", glossary).added == (("MFA", "Multi-Factor Authentication"),)
    assert expand("multi-factor authentication for admins", glossary).added == (("Multi-Factor Authentication", "MFA"),)
    assert expand("is it safe", glossary).added == ()  # "it" is not IT
    assert expand("what is a nonce", glossary).added == ()  # a meaning is no other name
    assert expand("MFA (multi-factor authentication)", glossary).added == ()
    assert expand("how do MFA devices work?", glossary).trace() == [
        "expanded by the glossary: MFA -> Multi-Factor Authentication"]


def test_every_name_of_a_term_is_one_word():
    same = SameWords([term("MFA", "Multi-Factor Authentication")])
    assert same.one_word("Multi-Factor Authentication (MFA) devices") == same.one_word("MFA devices")
    assert same.one_word("multi factor authentication") == same.one_word("MFA")
    assert same.one_word("a mfa-ish word") == "a mfa-ish word"


SOURCE = """# Access Standard

## Second factors

Every administrator MUST sign in with Multi-Factor Authentication (MFA). The server keeps the shared secret.

## Devices

A lost MFA device MUST be revoked within 24 hours.

## Sessions

A session ends after 15 minutes without a request.
"""


@pytest.fixture
def store(tmp_path: Path) -> Path:
    assert kbuild(tmp_path, "init", str(tmp_path)).exit_code == 0
    kbuildfile = tmp_path / "Kbuildfile.py"  # small facts, so that the source has several
    kbuildfile.write_text(kbuildfile.read_text().replace("floor_tokens=2000, cap_tokens=4000", "floor_tokens=15, cap_tokens=40"))
    (tmp_path / "standard.md").write_text(SOURCE)
    assert kbuild(tmp_path, "add", "auth", "standard.md").exit_code == 0
    result = kbuild(tmp_path)
    assert result.exit_code == 0, result.output
    return tmp_path


def test_the_glossary_page_names_each_term_with_its_sentence_and_fact_linked_from_the_project(store):
    page = (store / "kb/auth/glossary.md").read_text()
    line = next(line for line in page.splitlines() if line.startswith("- **MFA**"))
    assert "stands for Multi-Factor Authentication" in line
    assert '"Every administrator MUST sign in with Multi-Factor Authentication (MFA)."' in line
    assert "](facts/standard/" in line
    assert "[glossary.md](glossary.md): 1 term the sources define" in (store / "kb/auth/index.md").read_text()
    terms = json.loads((store / "kb/auth/glossary.json").read_text())["terms"]
    assert [(t["term"], t["means"]) for t in terms] == [("MFA", "Multi-Factor Authentication")]
    assert kbuild(store, "check").exit_code == 0


def test_an_edit_of_a_fact_that_defines_nothing_rereads_its_terms_and_writes_no_glossary(store):
    (store / "standard.md").write_text(SOURCE.replace("15 minutes", "20 minutes"))
    result = kbuild(store, "build", "--json")
    assert result.exit_code == 0, result.output
    executed = json.loads(result.output[result.output.index("{"):])["executed"]
    assert [q for q in executed if q.startswith('fact_terms("auth","standard",')] != []
    assert len([q for q in executed if q.startswith("fact_terms(")]) == 1
    assert 'project_glossary("auth")' not in executed

    (store / "standard.md").write_text(SOURCE.replace("(MFA)", "(MFA), commonly referred to as two-step login"))
    result = kbuild(store, "build", "--json")
    assert 'project_glossary("auth")' in json.loads(result.output[result.output.index("{"):])["executed"]
    assert "**two-step login** another name for Multi-Factor Authentication" in (store / "kb/auth/glossary.md").read_text()


def test_context_and_search_take_the_readers_words_for_the_sources_and_trace_it(store):
    result = kbuild(store, "context", "revoking a lost multi-factor authentication device", "--trace")
    assert result.exit_code == 0, result.output
    assert "expanded by the glossary: Multi-Factor Authentication -> MFA" in result.output
    assert "A lost MFA device MUST be revoked within 24 hours." in result.output
    result = kbuild(store, "search", "lost multi-factor authentication device")
    assert result.exit_code == 0 and "Devices" in result.output, result.output


STANDARD_LISTS = """# List of Symbols, Abbreviations, and Acronyms

AAL
: Authentication Assurance Level

CSP
: Credential Service Provider

# Definitions

Authenticator
: Something the subject possesses and controls that is used to authenticate a subscriber.

Network
: An open communications medium, typically the Internet.

| Acronym | Meaning |
|---|---|
| IAL | Identity Assurance Level |
| FAL | Federation Assurance Level |
| SMS | Text messages |
| NA | - |

- PAD: Presentation Attack Detection
- **KBV** — Knowledge-Based Verification
- Note: the list is not complete.

# Requirements

The CSP SHALL bind at least one authenticator at AAL2.
"""


def test_a_standards_lists_of_abbreviations_and_definitions():
    """A standard names its acronyms in a list of its own, not in its sentences: a definition
    list ("AAL" then ": Authentication Assurance Level", as kramdown and Pandoc write one), a
    table, a list of items. Each is an acronym where its words spell it; a definition list's other
    terms are given their meaning."""
    terms = found(STANDARD_LISTS)
    for short, long in (("AAL", "Authentication Assurance Level"), ("CSP", "Credential Service Provider"),
                        ("IAL", "Identity Assurance Level"), ("FAL", "Federation Assurance Level"),
                        ("PAD", "Presentation Attack Detection"), ("KBV", "Knowledge-Based Verification")):
        assert (short, long, "acronym") in terms, (short, terms)
    assert ("Authenticator", ("Something the subject possesses and controls that is used to authenticate a "
                              "subscriber"), "meaning") in terms
    assert ("Network", "An open communications medium, typically the Internet", "meaning") in terms
    assert not [t for t in terms if t[0] in {"SMS", "NA", "Note", "Acronym"}], terms  # words that spell no acronym


GLOSSARY_ENTRIES = """# Glossary

memorized secret
: See _password_.

blocklist
: A list of values that may not be chosen. This concept has historically been known as a _blacklist_.

electronic authentication (e-authentication)
: See _digital authentication_.

identity provider (IdP)
: The party that vouches for a subscriber.

credential service provider (CSP)
: A trusted entity that issues authenticators.

authenticator
: Something the subscriber possesses. See _authenticator type_.

factor
: See _authentication factor_ and _authenticator type_.
"""


def test_a_glossarys_entries_that_give_another_name():
    """A standard's glossary names a term it no longer uses by the one it does ("memorized
    secret: See password"), and gives an older or shorter name in brackets or in its words: each
    is another name, which a question in those words asks for. An entry that only points on
    ("See authenticator type" after a definition) is a meaning, not another name."""
    terms = found(GLOSSARY_ENTRIES)
    for alias in (("memorized secret", "password"), ("blacklist", "blocklist"),
                  ("electronic authentication", "digital authentication"),
                  ("e-authentication", "electronic authentication"), ("IdP", "identity provider")):
        assert (*alias, "alias") in terms, (alias, terms)
    assert ("CSP", "credential service provider", "acronym") in terms
    assert ("credential service provider", "A trusted entity that issues authenticators", "meaning") in terms
    assert not [t for t in terms if t[0] in ("authenticator", "factor") and t[2] == "alias"], terms
    glossary = [GlossaryTerm.of(d, "g/glossary") for d in definitions(GLOSSARY_ENTRIES)]
    assert expand("How long must a memorized secret be?", glossary).also == "password"


def test_an_acronym_a_heading_spells_out():
    """A sheet may name an acronym only in a heading ("Encryption as a Service (EaaS)" in the
    Secrets Management sheet); a heading's other brackets and code are no definitions."""
    text = ("# Secrets\n\n## 2.4 Encryption as a Service (EaaS)\n\nUse it.\n\n"
            "```\n# Not a Heading (NAH)\n```\n\n## Examples (Python)\n\nRate Limiting (Throttling) is prose.\n")
    assert found(text) == [("EaaS", "Encryption as a Service", "acronym")]


def test_a_terminology_section_gives_its_terms_meanings():
    """The OAuth 2.0 sheet defines its terms in a list under "## Terminology" ("- **Client**:
    Generally refers to ..."): none of them was in its glossary. A bold lead-in elsewhere is a
    point made, not a term."""
    terms = {(t, kind): means for t, means, kind in found((DATA / "owasp/OAuth2_Cheat_Sheet.md").read_text())}
    assert terms[("Client", "meaning")].startswith("Generally refers to an application making protected resource")
    assert terms[("Resource Server", "meaning")].startswith("Refers to the server hosting the protected resources")
    assert terms[("Refresh Tokens", "meaning")].startswith("are credentials used to obtain access tokens")
    assert terms[("RS", "acronym")] == "Resource Server"
    assert found("# Guide\n\n## Rules\n\n- **Rotate keys**: every 90 days.\n") == []


def test_a_question_that_describes_a_defined_term_asks_for_it():
    """A reader describes what the source names: "the cluster's backing key-value database" is
    what a glossary defines as etcd. Three words of the definition's first sentence at least, and
    a third of them, or the question is only near it."""
    glossary = [term("etcd", "A consistent and highly-available key-value store used as the backing store for all "
                             "cluster data", "meaning"),
                term("pod", "The smallest deployable unit of computing", "meaning")]
    asked = expand("How bad is write access to the cluster's backing key-value database?", glossary)
    assert asked.also == "etcd"
    assert asked.trace() == ["expanded by the glossary: a description (cluster, backing, key, value) -> etcd"]
    assert expand("Which key-value database should I pick?", glossary).added == ()  # two words: near, not it
    assert expand("Who can write to etcd, the cluster's backing key-value store?", glossary).added == ()  # named
