"""Search over the index lines, progressive disclosure with show, and the lookup log."""
from __future__ import annotations

import re
from pathlib import Path

import pytest
from conftest import kbuild
from documents import PAYMENTS, headed, small_store


@pytest.fixture
def store(tmp_path: Path) -> Path:
    small_store(tmp_path, {"payments.md": PAYMENTS, "hours.md": "# Hours\n\nThe shop opens at nine. It closes at six on weekdays.\n"})
    assert kbuild(tmp_path).exit_code == 0
    return tmp_path


def test_a_question_worded_differently_finds_its_fact(store):
    result = kbuild(store, "search", "how long may a customer wait before requesting refunds?")
    assert result.exit_code == 0
    best = result.output.splitlines()[0]
    assert best.endswith("kb/shop/facts/payments/refunds.md")
    opened = kbuild(store, "search", "when does the shop close", "--open").output
    assert "It closes at six on weekdays." in opened and "## Original" in opened


def test_show_walks_down_and_up(store):
    top = kbuild(store, "show", "kb/index.md").output
    assert "children: kb/shop/index.md" in top
    fact = kbuild(store, "show", "kb/shop/facts/payments/refunds.md").output
    assert "parent: kb/shop/facts/payments/index.md" in fact
    assert kbuild(store, "show", "kb/nowhere.md").exit_code == 2


def test_every_lookup_is_logged_and_misses_are_listed(store):
    kbuild(store, "search", "refund deadline")
    gap = kbuild(store, "search", "quantum teleportation")
    assert "this is a gap" in gap.output
    misses = kbuild(store, "search", "--misses").output
    assert "quantum teleportation" in misses and "refund deadline" not in misses
    assert len((store / ".kbuild/lookups.jsonl").read_text().splitlines()) == 2


def test_context_respects_the_budget_traces_drops_and_says_gap(store):
    from kbuild.text.tokens import estimate_tokens

    result = kbuild(store, "context", "refund requests and payments", "--budget", "100", "--trace")
    assert result.exit_code == 0
    out = result.output
    assert out.startswith("# Context: refund requests and payments")
    kept = [line for line in out.splitlines() if line.startswith("kept ")]
    lines = [line for line in out.splitlines() if line.startswith("line ")]
    assert kept and lines and all("matched" in line for line in kept)  # the trace says why
    assert "## Also relevant (summaries)" in out
    printed = kbuild(store, "context", "refund requests and payments", "--budget", "100").output
    assert estimate_tokens(printed) <= 100  # a hard limit, the summary lines included
    links = re.findall(r"\]\(([^)]+)\)", printed)
    assert links and all((store / link).is_file() for link in links)  # every link resolves from the root
    assert printed == kbuild(store, "context", "refund requests and payments", "--budget", "100").output  # deterministic
    gap = kbuild(store, "context", "quantum teleportation").output
    assert "a gap" in gap


def test_doctor_clean_graph_around_a_page_and_the_harness_block(store):
    doctor = kbuild(store, "doctor")
    assert doctor.exit_code == 0 and "PASS  Python" in doctor.output and "FAIL" not in doctor.output
    mermaid = kbuild(store, "graph", "--format", "mermaid", "--no-files", "kb/shop/facts/hours/index.md").output
    assert mermaid.startswith("graph LR") and "payments" not in mermaid and "hours" in mermaid
    (store / "AGENTS.md").write_text("# Agents\n\nRun the tests first.\n")
    kbuildfile = store / "Kbuildfile.py"
    kbuildfile.write_text(kbuildfile.read_text() + '\nharness_file = "AGENTS.md"\n')
    (store / "hours.md").write_text("# Hours\n\nThe shop opens at ten. It closes at six on weekdays.\n")
    assert kbuild(store).exit_code == 0
    agents = (store / "AGENTS.md").read_text()
    assert agents.startswith("# Agents\n\nRun the tests first.\n\n<!-- kbuild:begin")
    assert "[shop](kb/shop/index.md)" in agents and agents.rstrip().endswith("<!-- kbuild:end -->")
    assert kbuild(store).exit_code == 0 and (store / "AGENTS.md").read_text() == agents  # stable
    (store / ".kbuild/cache").mkdir(exist_ok=True)
    (store / ".kbuild/cache/answer").write_text("paid for")
    assert kbuild(store, "clean").exit_code == 0
    assert not (store / ".kbuild/state.db").exists() and (store / ".kbuild/cache/answer").read_text() == "paid for"
    assert kbuild(store, "check").exit_code == 0  # the lock alone still answers
    kbuildfile.write_text("raise SystemExit(3)\n")
    assert kbuild(store, "doctor").exit_code == 1


def test_an_abbreviation_finds_the_spelled_out_term():
    from kbuild.text.ranking import defined_abbreviations, query_terms

    assert defined_abbreviations("Each Service Level Agreement (SLA) holds. The time to live (TTL) is") == {
        "sla": "service level agreement", "ttl": "time to live"}
    terms = query_terms("what is the SLA for env vars?", {"sla": "service level agreement"})
    assert {"servic", "level", "agreement", "environ", "variabl"} <= set(terms) and "what" not in terms
    assert terms["environ"] > terms["env"]  # a text spells the term out more often than it abbreviates it
    assert "function" in query_terms("may I write a deferred import inside a def?")  # Python's word for it


def test_an_apostrophe_adds_no_word_to_a_question():
    from kbuild.text.ranking import query_terms

    # "user's" was the words "user" and "s", and every "it's" of a section matched the "s"
    terms = query_terms("where do I keep the user's pepper? don't I've we'll they're")
    assert {"keep", "user", "pepper"} <= set(terms) and not {"s", "t", "ve", "ll", "re"} & set(terms)


def test_a_comparative_is_the_word_of_its_adjective():
    """"compatible with old pythons" missed PEP 810's "eager on older versions": the stemmer keeps
    "older" apart from "old" (issue 53)."""
    from kbuild.text.ranking import tokens

    assert tokens("older newest stronger smallest earlier") == tokens("old new strong small early")
    assert tokens("later latest best") != tokens("late late good")  # "later" is mostly "afterwards"
    # an irregular past, as "never sent over plain http" asks of "only send the cookie"
    assert tokens("sent kept told chosen") == tokens("send keep tell choose")


def test_a_readers_plain_words_ask_for_the_standards_formal_ones(tmp_path):
    """A standard writes "instruct the browser to clear", a reader asks what to "tell the browser
    to wipe": each plain word also asks, at half weight, for the formal words written for it, and
    an idiom ("make sure") for its one word, not its own ("make", "sure") (issue 53)."""
    from kbuild.text.ranking import query_terms

    terms = query_terms("how do I make sure the server tells the browser to wipe it?")
    assert terms["ensur"] == terms["instruct"] == terms["clear"] == 0.5 and terms["wipe"] == 1.0
    assert "make" not in terms and "sure" not in terms
    guide = headed("Sessions", (
        ("Logout", "On logout, instruct the browser to clear its storage with the Clear-Site-Data header."),
        ("Server", "The server tells the browser the session length; a server may keep it longer."),
        ("Make", "Make the server keep a log of each browser it serves, to be sure of its clients."),
        ("Tabs", "A browser shares the session between its tabs; the server cannot tell them apart.")))
    small_store(tmp_path, {"sessions.md": guide})
    assert kbuild(tmp_path).exit_code == 0
    result = kbuild(tmp_path, "context", "how do I make sure the server tells the browser to wipe everything?",
                    "--budget", "120", "--trace")
    kept = [line for line in result.output.splitlines() if line.startswith("kept")]
    assert kept and "› Logout (" in kept[0], result.output


def test_a_yes_or_no_judgement_is_no_word_of_the_question(tmp_path):
    """"is == None ok?", "is from foo import * acceptable?": the source gives its verdict as
    "should" or "avoid", never as the reader's "ok"; the "ok" of a code sample and the "accept"
    of an argument outranked the answer (issue 53)."""
    from kbuild.text.ranking import query_terms

    terms = query_terms("is it ok, okay, fine, alright or acceptable to import * from a module?")
    assert {"import", "modul"} <= set(terms) and not {"ok", "okay", "fine", "alright", "accept"} & set(terms)
    guide = headed("Style", (
        ("Imports", "Wildcard imports (from module import *) should be avoided."),
        ("Arguments", "A function may accept any argument; an acceptable default is None."),
        ("Samples", "The sample prints OK when the import works: print('OK').")))
    small_store(tmp_path, {"style.md": guide})
    assert kbuild(tmp_path).exit_code == 0
    result = kbuild(tmp_path, "context", "is from foo import * acceptable? is it ok?", "--budget", "60", "--trace")
    kept = [line for line in result.output.splitlines() if line.startswith("kept")]
    assert kept and "› Imports (" in kept[0], result.output


def test_the_build_writes_the_search_index_and_an_edit_reindexes_one_source(store):
    index = store / "kb/shop/search-index/sections.json"
    assert index.is_file() and (store / "kb/shop/search-index/vocab.index.json").is_file()
    before = index.read_text()
    (store / "hours.md").write_text("# Hours\n\nThe shop opens at ten. It closes at six on weekdays.\n")
    report = kbuild(store, "-v").output
    assert 'source_sections("shop","hours")' in report and 'source_sections("shop","payments")' not in report
    assert index.read_text() != before
    assert kbuild(store, "search", "when does the shop open").output.splitlines()[0].endswith("kb/shop/facts/hours/hours.md")
    assert kbuild(store, "check").exit_code == 0


def test_the_abbreviations_a_source_defines_reach_its_index_and_an_edit_that_drops_one(store):
    index = store / "kb/shop/search-index/sections.json"
    (store / "hours.md").write_text("# Hours\n\nThe shop opens at nine.\n\n## Service\n\n"
                                    "Each Service Level Agreement (SLA) is kept. It closes at six.\n")
    assert kbuild(store).exit_code == 0
    assert '"abbreviations": {"sla": "service level agreement"}' in index.read_text()
    assert "kb/shop/facts/hours/" in kbuild(store, "search", "service level agreement").output.splitlines()[0]
    (store / "hours.md").write_text("# Hours\n\nThe shop opens at nine.\n\n## Service\n\nIt closes at six.\n")
    assert kbuild(store).exit_code == 0
    assert '"abbreviations": {}' in index.read_text()


def test_each_section_is_one_line_of_the_index_whatever_its_words(store):
    """The index takes each section's line as its group spelled it: a heading with quotes and a
    backslash stays one line of sections.json, and the index counts one document a line, so
    each score points at its own section."""
    import json

    (store / "hours.md").write_text('# Hours\n\nThe shop opens at nine.\n\n## The "late" shift \\ nights\n\n'
                                    "The shop opens at midnight on Fridays.\n")
    assert kbuild(store).exit_code == 0
    folder = store / "kb/shop/search-index"
    text = (folder / "sections.json").read_text("utf-8")
    docs = json.loads(text)["docs"]
    assert len(text.split("\n")) == len(docs) + 5  # three lines of head, a line a section, "]}" and the end
    assert json.loads((folder / "params.index.json").read_text())["num_docs"] == len(docs)
    assert any('The "late" shift \\ nights' in d["crumb"] for d in docs)
    best = kbuild(store, "search", "opens at midnight on Fridays").output.splitlines()[0]
    assert best.endswith("kb/shop/facts/hours/hours.md")


def test_search_prints_scores_in_rank_order(store):
    """The fact sections are ranked by the search index and the other pages (views, indexes) by
    their index lines, two scales: each printed ranking is in the order of its scores, and the
    second says it is another ranking (a 1.06 printed under a 0.25 read as a wrong order)."""
    out = kbuild(store, "search", "refund payment", "-n", "10").output.splitlines()
    assert any("kb/shop/artifacts/views/" in line for line in out)  # both rankings are printed
    rankings: list[list[float]] = [[]]
    for line in out:
        if line.startswith("other pages"):
            rankings.append([])
        elif re.match(r"^\s*\d+\.\d+\s+kb/", line):
            rankings[-1].append(float(line.split()[0]))
    assert len(rankings) == 2 and all(rankings), out
    assert all(scores == sorted(scores, reverse=True) for scores in rankings), out


def test_a_word_one_project_mentions_once_does_not_outrank_the_project_about_it(tmp_path):
    """Each project has an index of its own: a word everywhere in one project is rare in another
    that mentions it once. Scored per project, the single mention came first; scored as one
    store, the sections about it do."""
    about = "# Injection\n\n" + "".join(
        f"## {title}\n\n" + f"Injection {text}. " * 3 + "\n\n"
        for title, text in (("Defenses", "is stopped by prepared statements and bound parameters"),
                            ("Anatomy", "happens when input is pasted into a query"),
                            ("Stored procedures", "can still happen inside a stored procedure"),
                            ("Escaping", "escaping is fragile and discouraged")))
    other = "# Passwords\n\n" + "".join(
        f"## {title}\n\n{text}\n\n" for title, text in (
            ("Peppers", "A pepper protects the hashes when an attacker reads the database through an injection."),
            ("Salts", "A salt is unique to each password and stored with the hash."),
            ("Work factors", "The work factor slows each guess of a password."),
            ("Algorithms", "Argon2id is the first choice, then scrypt, then bcrypt.")))
    small_store(tmp_path, {"injection.md": about}, project="sql")
    (tmp_path / "passwords.md").write_text(other)
    assert kbuild(tmp_path, "add", "passwords", "passwords.md").exit_code == 0
    assert kbuild(tmp_path).exit_code == 0
    result = kbuild(tmp_path, "context", "injection", "--budget", "300", "--trace")
    kept = [line for line in result.output.splitlines() if line.startswith("kept")]
    assert kept and "kb/sql/" in kept[0], result.output


def test_a_word_the_sources_write_as_two_or_two_words_they_write_as_one_finds_them(tmp_path):
    """A reader writes "classmethod" where the source says "class method", or "log in" where it
    says "login": BM25 shares no word with them, so the section that answers came far down."""
    guide = headed("Guide", (
        ("Naming", "Always use cls for the first argument of a class method."),
        ("Arguments", "The first argument names the object; keep the first argument short."),
        ("Defaults", "A first argument may have a default value, as any argument may."),
        ("Sessions", "Renew the session identifier after every login."),
        ("Cookies", "A session cookie holds the session identifier after the user signs on."),
        ("Logout", "Send Clear-Site-Data on logout, so the browser forgets what it kept."),
        ("Browsers", "The browser keeps a session until the user closes it; a browser may keep it longer.")))
    small_store(tmp_path, {"guide.md": guide})
    assert kbuild(tmp_path).exit_code == 0
    for question, answer in (("what is the first argument of a classmethod called?", "Naming"),
                             ("what should happen to the session after I log in?", "Sessions"),
                             ("what should the browser be told when someone logs out?", "Logout")):
        result = kbuild(tmp_path, "context", question, "--budget", "120", "--trace")
        kept = [line for line in result.output.splitlines() if line.startswith("kept")]
        assert kept and f"› {answer} (" in kept[0], result.output


def test_sections_of_one_page_print_its_link_once_and_adjacent_ones_as_one_block(tmp_path):
    """A context of parts of one document printed the page's link and breadcrumb once a part,
    a quarter to a third of the budget: now each page is named once and parts that follow one
    another in the text are one block, so more of the sources fits the same budget."""
    guide = "# Guide\n\n" + "".join(f"## {title}\n\n" + f"The {title.lower()} rule of refunds: {text}. " * 6 + "\n\n"
                                    for title, text in (("Requests", "ask within thirty days"),
                                                        ("Approval", "a clerk approves each refund"),
                                                        ("Payment", "refunds go back to the card"),
                                                        ("Unrelated", "the shop opens at nine")))
    small_store(tmp_path, {"guide.md": guide})
    kbuildfile = tmp_path / "Kbuildfile.py"  # one fact of four sections
    kbuildfile.write_text(kbuildfile.read_text().replace("floor_tokens=15, cap_tokens=40", "floor_tokens=2000, cap_tokens=4000"))
    assert kbuild(tmp_path).exit_code == 0
    printed = kbuild(tmp_path, "context", "refund requests approval payment", "--budget", "2000").output
    links = re.findall(r"\]\(([^)]+)\)", printed)
    assert len(links) == len(set(links)) >= 1, printed  # each page once
    blocks = re.findall(r"text\.md lines (\d+)-(\d+)", printed)
    assert len(blocks) == 1, printed  # the adjacent sections are one block
    assert not re.search(r"^## Requests$", printed, re.MULTILINE) and "### Requests (text.md lines" in printed  # no heading twice
    for rule in ("thirty days", "a clerk approves", "back to the card"):
        assert rule in printed



def test_a_heading_ranks_its_own_section_above_the_sections_under_it(tmp_path):
    """A section's own headings count three times for its words, a heading over it once: the
    list under "Primary Defenses" came 21st for "what are the primary defenses against SQL
    injection?", below every subsection that inherited the heading (issue 53)."""
    filler = "The example binds the customer name and reads the balance of the account it names. " * 5
    guide = ("# Injection\n\n## Primary Defenses\n\n- Option 1: prepared statements\n- Option 2: stored procedures\n"
             "- Option 3: allow-list validation\n\n" + filler + "\n\n"
             + "".join(f"### Option {n}: {name}\n\n{name} stop SQL injection. {filler}\n\n"
                       for n, name in ((1, "prepared statements"), (2, "stored procedures"), (3, "allow-list validation")))
             + "".join(f"## {name}\n\n{name} matters to SQL injection. {filler}\n\n"
                       for name in ("Anatomy", "Detection", "Logging", "Testing", "Related Articles")))
    small_store(tmp_path, {"injection.md": guide})
    kbuildfile = tmp_path / "Kbuildfile.py"  # one fact, its sections cut at headings
    kbuildfile.write_text(kbuildfile.read_text().replace("floor_tokens=15, cap_tokens=40", "floor_tokens=2000, cap_tokens=4000"))
    assert kbuild(tmp_path).exit_code == 0
    result = kbuild(tmp_path, "context", "what are the primary defenses against SQL injection?", "--budget", "200", "--trace")
    kept = [line for line in result.output.splitlines() if line.startswith("kept")]
    assert kept and "› Primary Defenses (" in kept[0], result.output


def test_a_context_prints_words_its_source_repeats_under_several_headings_once(tmp_path):
    """The Docker sheet closes three rules with the same paragraph ("As a Kubernetes cluster
    administrator, you can configure a hardened default..."): a context printed it three times,
    a fifth of a 2,500-token budget, and the answer it pushed out was missed (issue 53)."""
    boiler = ("As a cluster administrator, you can configure a hardened default with the admission controller. "
              "If greater customisation is desired, consider admission webhooks or a third party alternative, "
              "each of which checks every pod the cluster is asked to run against the policy its owners wrote, "
              "and refuses the pods that ask for more than the policy grants them.")  # a section of its own
    guide = ("# Containers\n\n"
             + "".join(f"## Rule {n}: {name}\n\n" + f"{name} keeps the container safe. " * 12 + f"\n\n### In a cluster\n\n{boiler}\n\n"
                       for n, name in ((1, "Set a user"), (2, "Limit capabilities"), (3, "Prevent escalation")))
             + "## Secrets\n\nIn the cluster, secrets are stored in plaintext by default: add encryption. "
             + "A key the cluster holds should be rotated, and its use logged. " * 8 + "\n")
    small_store(tmp_path, {"containers.md": guide})
    kbuildfile = tmp_path / "Kbuildfile.py"  # one fact, its sections cut at headings
    kbuildfile.write_text(kbuildfile.read_text().replace("floor_tokens=15, cap_tokens=40", "floor_tokens=2000, cap_tokens=4000"))
    assert kbuild(tmp_path).exit_code == 0
    result = kbuild(tmp_path, "context", "how does a cluster administrator configure a hardened default?",
                    "--budget", "330", "--trace")
    printed = result.output[:result.output.index("kept")] if "kept" in result.output else result.output
    assert printed.count("you can configure a hardened default") == 1, result.output
    # the budget the copies took goes to the next section, whole
    assert re.search(r"^kept .* › Secrets \(", result.output, re.MULTILINE), result.output
    assert re.search(r"^same .*Rule \d: .* › In a cluster .*: the words of .*Rule \d: .* › In a cluster", result.output,
                     re.MULTILINE), result.output  # the trace says which it repeats


def test_a_numeronym_finds_the_word_it_counts_out():
    """"k8s" is how developers write Kubernetes (k, 8 letters, s); a question with it found no
    section of a sheet that spells Kubernetes out (issue 53)."""
    from kbuild.text.ranking import query_terms, tokens

    for short, long in (("k8s", "Kubernetes"), ("i18n", "internationalization"), ("l10n", "localization"),
                        ("a11y", "accessibility"), ("o11y", "observability")):
        assert set(tokens(long)) <= set(query_terms(f"how is {short} set up here?")), short
    # and what a question's vector is made of: a sentence model reads "k8s" as pieces
    from kbuild.text.ranking import spelled_out

    assert spelled_out("are k8s secrets safe behind the API?") == "kubernetes"


def test_a_section_that_runs_into_the_next_heading_is_named_where_it_starts(tmp_path):
    """A small section is searched with its neighbour: "Revocation", two lines, with "Auditing",
    the next heading up. Its breadcrumb read "Lifecycle › Revocation › Auditing", as if Auditing
    stood under Revocation; it is named where it starts, and the heading inside it is printed."""
    rotate = "You should regularly rotate secrets so that stolen credentials work only for a short time. " * 4
    guide = ("# Vault Guide\n\n## Lifecycle\n\n" + "Secrets pass through creation, rotation and revocation. " * 2
             + f"\n\n### Rotation\n\n{rotate}\n\n{rotate}\n\nUser credentials are excluded from regular rotation.\n\n"
             "### Revocation\n\nRevoke a secret as soon as it is no longer required or may be compromised.\n\n"
             "## Auditing\n\n" + "Audit every access to every secret in the vault. " * 6 + "\n")
    small_store(tmp_path, {"guide.md": guide})
    kbuildfile = tmp_path / "Kbuildfile.py"  # one fact, its sections cut at headings
    kbuildfile.write_text(kbuildfile.read_text().replace("floor_tokens=15, cap_tokens=40", "floor_tokens=2000, cap_tokens=4000"))
    assert kbuild(tmp_path).exit_code == 0
    printed = kbuild(tmp_path, "context", "audit every access to a secret", "--budget", "300").output
    assert "### Lifecycle › Revocation (text.md lines" in printed, printed
    assert "Revocation › Auditing" not in printed and "## Auditing" in printed, printed
    found = kbuild(tmp_path, "search", "audit every access to a secret").output
    assert "[Vault Guide › Lifecycle › Revocation](" in found and "› Auditing" not in found, found
