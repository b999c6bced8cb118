"""`kbuild eval` over the golden set (tests/data/retrieval-questions.json): recall of `kbuild
context` at each budget, with the offline backend, over the four PEPs in tests/data."""
from __future__ import annotations

import json
import re
import shutil
from pathlib import Path

import pytest
from conftest import kbuild

DATA = Path(__file__).parent / "data"
QUESTIONS = DATA / "retrieval-questions.json"
SOURCES = {"pep-0008": DATA / "corpus/pep-0008.rst", "pep-0020": DATA / "corpus/pep-0020.rst",
           "pep-0810": DATA / "corpus/pep-0810.rst", "pep-0747": DATA / "pep-0747/rev-11.rst"}
FLOORS = {2500: 0.95, 5000: 0.97, 10000: 1.0, 15000: 1.0}  # what the ranker reaches today (all four PEPs one project); raise it, never lower it


@pytest.fixture(scope="module")
def peps(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("peps")
    assert kbuild(root, "init", str(root)).exit_code == 0
    for name, path in SOURCES.items():
        shutil.copy(path, root / f"{name}.rst")
        assert kbuild(root, "add", "peps", f"{name}.rst").exit_code == 0
    assert kbuild(root).exit_code == 0
    return root


def test_the_golden_set_is_honest():
    """Every answer regex matches the source it names (white space collapsed), so a miss is the
    ranker's and not the question's; there are at least 40, over every source."""
    questions = json.loads(QUESTIONS.read_text())["questions"]
    assert len(questions) >= 40 and {q["source"] for q in questions} == set(SOURCES)
    for q in questions:
        text = " ".join(SOURCES[q["source"]].read_text().split())
        assert re.search(q["answer"], text, re.I), q


@pytest.mark.slow
def test_recall_at_budget_holds_its_floor(peps):
    result = kbuild(peps, "eval", str(QUESTIONS), "--json")
    assert result.exit_code == 0, result.output
    answer = json.loads(result.output[result.output.index("{"):])
    assert answer["schema"] == "kbuild.eval/1"
    recall = {b["budget"]: b["recall"] for b in answer["budgets"]}
    assert set(recall) == set(FLOORS)
    for budget, floor in FLOORS.items():
        assert recall[budget] >= floor, (budget, recall[budget], [m["question"] for b in answer["budgets"]
                                                                    if b["budget"] == budget for m in b["misses"]])
    table = kbuild(peps, "eval", str(QUESTIONS), "--no-misses").output
    assert "| 5,000 |" in table and "missed at" not in table


OWASP_QUESTIONS = DATA / "retrieval-questions-owasp.json"
OWASP = {name.lower().replace("_", "-"): DATA / f"owasp/{name}_Cheat_Sheet.md"
         for name in ("Password_Storage", "SQL_Injection_Prevention", "HTTP_Headers", "Session_Management")}
# words only, each sheet a project of its own (benchmarks/retrieval.py golden); BM25 over the raw
# paragraphs reached 0.83 / 0.88 / 0.94 / 0.94
OWASP_FLOORS = {2500: 0.95, 5000: 0.97, 10000: 1.0, 15000: 1.0}  # 46, 47, 48 and 48 of 48


def test_the_owasp_golden_set_is_honest():
    """At least 40 questions over every sheet, each answer regex found in the sheet it names, and
    at least a third worded as a reader asks, not in the sheet's words."""
    questions = json.loads(OWASP_QUESTIONS.read_text())["questions"]
    assert len(questions) >= 40 and {q["source"].lower().replace("_", "-") for q in questions} == set(OWASP)
    assert sum(q["wording"] == "reader" for q in questions) * 3 >= len(questions)
    for q in questions:
        text = " ".join(OWASP[q["source"].lower().replace("_", "-")].read_text().split())
        assert re.search(q["answer"], text, re.I), q


def test_the_unseen_golden_set_is_honest():
    """The set no ranker ran over when it was written: every answer in the sheet it names, every
    question in a reader's words."""
    questions = json.loads((DATA / "retrieval-questions-owasp-unseen.json").read_text())["questions"]
    sheets = {name: DATA / f"owasp/{name}_Cheat_Sheet.md"
              for name in ("Authentication", "Cryptographic_Storage", "Docker_Security", "Logging")}
    assert len(questions) >= 30 and {q["source"] for q in questions} == set(sheets)
    for q in questions:
        assert q["wording"] == "reader" and re.search(q["answer"], " ".join(sheets[q["source"]].read_text().split()), re.I), q


@pytest.mark.slow
def test_recall_over_several_projects_holds_its_floor(tmp_path):
    assert kbuild(tmp_path, "init", str(tmp_path)).exit_code == 0
    for project, path in OWASP.items():
        shutil.copy(path, tmp_path / path.name)
        assert kbuild(tmp_path, "add", project, path.name).exit_code == 0
    assert kbuild(tmp_path).exit_code == 0
    result = kbuild(tmp_path, "eval", str(OWASP_QUESTIONS), "--json")
    assert result.exit_code == 0, result.output
    answer = json.loads(result.output[result.output.index("{"):])
    recall = {b["budget"]: b["recall"] for b in answer["budgets"]}
    for budget, floor in OWASP_FLOORS.items():
        assert recall[budget] >= floor, (budget, recall[budget], [m["question"] for b in answer["budgets"]
                                                                    if b["budget"] == budget for m in b["misses"]])


BLIND_SHEETS = ("Secrets_Management", "Kubernetes_Security", "Input_Validation",
                "Server_Side_Request_Forgery_Prevention")


def test_the_blind_golden_set_is_honest():
    """The set written after the fusion's settings were chosen: every answer in the sheet it
    names, 9 questions a sheet, two thirds in a reader's words."""
    questions = json.loads((DATA / "retrieval-questions-owasp-blind.json").read_text())["questions"]
    sheets = {name: DATA / f"owasp/{name}_Cheat_Sheet.md" for name in BLIND_SHEETS}
    assert len(questions) == 36 and {q["source"] for q in questions} == set(sheets)
    assert sum(q["wording"] == "reader" for q in questions) == 24
    for q in questions:
        assert re.search(q["answer"], " ".join(sheets[q["source"]].read_text().split()), re.I), q


BLIND2_SHEETS = ("OAuth2", "Multi_Tenant_Security", "LLM_Prompt_Injection_Prevention", "DOM_based_XSS_Prevention")
BLIND3_SHEETS = ("Cross_Site_Scripting_Prevention", "AJAX_Security", "Ruby_on_Rails", "DOM_Clobbering_Prevention")


@pytest.mark.parametrize("questions, names", [("retrieval-questions-owasp-blind2.json", BLIND2_SHEETS),
                                              ("retrieval-questions-owasp-blind3.json", BLIND3_SHEETS)])
def test_the_later_blind_golden_sets_are_honest(questions, names):
    """40 questions each, written blind on four sheets no rule was written on, 10 a sheet, 7 of
    them in a reader's words: every answer in the sheet it names, once."""
    questions = json.loads((DATA / questions).read_text())["questions"]
    sheets = {name: " ".join((DATA / f"owasp/{name}_Cheat_Sheet.md").read_text().split()) for name in names}
    assert len(questions) == 40 and {q["source"] for q in questions} == set(sheets)
    assert sum(q["wording"] == "reader" for q in questions) == 28
    for q in questions:
        assert len(re.findall(q["answer"], sheets[q["source"]], re.I)) == 1, q


# Ranked by words and meaning (all-MiniLM-L6-v2 on this machine, what `kbuild init` turns on where
# it is installed), each sheet its own project: sets mostly in a reader's words, written without
# running a ranker (the third measured once, blind). Words alone reach 0.66 / 0.78 / 0.88 at 2,500
# on them (docs/retrieval.md).
MEANING_FLOORS = {"retrieval-questions-owasp-unseen.json": ({2500: 0.96, 5000: 0.96, 10000: 1.0, 15000: 1.0},
                                                            ("Authentication", "Cryptographic_Storage",
                                                             "Docker_Security", "Logging")),
                  "retrieval-questions-owasp-blind.json": ({2500: 0.94, 5000: 0.97, 10000: 0.97, 15000: 1.0},
                                                           BLIND_SHEETS),
                  "retrieval-questions-owasp-blind3.json": ({2500: 0.97, 5000: 0.97, 10000: 1.0, 15000: 1.0},
                                                            BLIND3_SHEETS)}


@pytest.mark.slow
@pytest.mark.timeout(1200)
@pytest.mark.parametrize("questions", sorted(MEANING_FLOORS))
def test_meaning_finds_what_a_reader_asks_in_other_words(tmp_path, monkeypatch, questions):
    from kbuild.services import scaffold

    monkeypatch.setattr(scaffold, "local_model_installed", lambda: True)  # as where the model is installed
    floors, sheets = MEANING_FLOORS[questions]
    assert kbuild(tmp_path, "init", str(tmp_path)).exit_code == 0
    for name in sheets:
        shutil.copy(DATA / f"owasp/{name}_Cheat_Sheet.md", tmp_path)
        assert kbuild(tmp_path, "add", name.lower().replace("_", "-"), f"{name}_Cheat_Sheet.md").exit_code == 0
    assert kbuild(tmp_path).exit_code == 0
    fused = json.loads(kbuild(tmp_path, "eval", str(DATA / questions), "--json").output)
    words = json.loads(kbuild(tmp_path, "eval", str(DATA / questions), "--json", "--lexical").output)
    for by_meaning, by_words in zip(fused["budgets"], words["budgets"]):
        assert by_meaning["recall"] >= max(floors[by_meaning["budget"]], by_words["recall"]), (
            by_meaning["budget"], by_meaning["recall"], [m["question"] for m in by_meaning["misses"]])
