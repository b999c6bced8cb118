"""`--json` on search, context, show, explain and doctor: versioned shapes (docs/json.md), the
same answers as the text, and failures as kbuild.error/1 with the exit code, never a traceback."""
from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
from conftest import kbuild
from documents import PAYMENTS, small_store

from kbuild.services import answers

REFUNDS = "kb/shop/facts/payments/refunds.md"
DOCS = Path(__file__).parent.parent / "docs" / "json.md"


@pytest.fixture(scope="module")
def store(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("store")
    small_store(root, {"payments.md": PAYMENTS, "hours.md": "# Hours\n\nThe shop opens at nine. It closes at six on weekdays.\n"})
    assert kbuild(root).exit_code == 0
    return root


def as_json(root: Path, *args: str, code: int = 0) -> dict:
    result = kbuild(root, *args, "--json")
    assert result.exit_code == code, result.output
    assert "Traceback" not in result.output
    return json.loads(result.stdout)  # warnings go to stderr: stdout is JSON alone


def test_search_names_pages_from_the_root_and_says_gap(store):
    found = as_json(store, "search", "how long may a customer wait before requesting refunds?", "-n", "3")
    assert found["schema"] == "kbuild.search/2" and found["gap"] is False
    assert [h["rank"] for h in found["hits"]] == [1, 2, 3]
    best = found["hits"][0]
    assert best["page"] == REFUNDS and best["index"] == "kb/shop/facts/payments/index.md"
    assert "90 days" in best["line"] and (store / best["page"]).is_file()
    gap = as_json(store, "search", "quantum teleportation")
    assert gap["gap"] is True and gap["hits"] == []
    misses = as_json(store, "search", "--misses")
    assert misses["schema"] == "kbuild.misses/1" and [m["query"] for m in misses["misses"]] == ["quantum teleportation"]
    opened = as_json(store, "search", "when does the shop close", "--open")
    assert opened["open"]["page"] == opened["hits"][0]["page"] and "closes at six" in opened["open"]["text"]


def test_context_is_the_text_it_prints_with_the_pages_named(store):
    question = "refund requests and payments"
    found = as_json(store, "context", question, "--budget", "100")
    assert found["schema"] == "kbuild.context/2" and found["budget"] == 100 and found["gap"] is False
    assert found["text"] == kbuild(store, "context", question, "--budget", "100").stdout
    first = found["sections"][0]
    assert first["pages"] == [REFUNDS] and "within 90 days" in first["text"] and found["tokens"] == first["tokens"]
    assert found["summaries"] and all(line["page"].startswith("kb/") for s in found["summaries"] for line in s["lines"])
    assert found == as_json(store, "context", question, "--budget", "100")  # deterministic
    assert as_json(store, "context", "quantum teleportation")["gap"] is True


def test_show_gives_the_page_its_parent_and_children(store):
    top = as_json(store, "show", "kb/index.md")
    assert top == {"schema": "kbuild.show/1", "page": "kb/index.md", "parent": None,
                   "children": ["kb/shop/index.md"], "text": (store / "kb/index.md").read_text()}
    fact = as_json(store, "show", REFUNDS)
    assert fact["page"] == REFUNDS and fact["parent"] == "kb/shop/facts/payments/index.md"
    assert "Refunds SHALL be requested within 90 days" in fact["text"]


def test_explain_says_what_a_page_is_built_from(store):
    found = as_json(store, "explain", REFUNDS)
    assert found["schema"] == "kbuild.explain/1" and found["query"] == 'fact("shop","payments","refunds")'
    assert found["up_to_date"] is True and found["would_run"] is None and found["writes"] == [REFUNDS]
    assert any(r["dep"].startswith("rewrite(") for r in found["reads"]) and found["read_by"]


def test_doctor_passes_and_fails_in_json(store, tmp_path):
    found = as_json(store, "doctor")
    assert found["schema"] == "kbuild.doctor/1" and found["ok"] is True
    assert {f["status"] for f in found["findings"]} <= {"PASS", "WARN"} and all(f["fix"] == "" for f in found["findings"]
                                                                                if f["status"] == "PASS")
    broken = as_json(tmp_path, "doctor", code=1)
    assert broken["ok"] is False and broken["findings"][-1]["status"] == "FAIL"


@pytest.mark.parametrize("args, message", [
    (("show", "kb/nowhere.md"), "is not a page of the store"),
    (("show",), "Missing argument"),
    (("context", "q", "--budget", "many"), "'many' is not a valid integer"),
    (("search",), "give a query"),
    (("explain", "nothing-at-all"), "neither a recorded query"),
])
def test_failures_are_json_with_the_exit_code(store, args, message):
    failed = as_json(store, *args, code=2)
    assert failed["schema"] == "kbuild.error/1" and failed["exit_code"] == 2 and message in failed["error"]


def test_no_kbuildfile_is_a_json_error(tmp_path):
    failed = as_json(tmp_path, "search", "refunds", code=2)
    assert failed["schema"] == "kbuild.error/1" and "kbuild init" in failed["error"]


def test_text_output_is_unchanged_and_check_format_json_is_versioned(store):
    plain = kbuild(store, "show", "kb/nowhere.md")
    assert plain.exit_code == 2 and not plain.stdout and "kbuild: " in plain.output  # the red line, no JSON
    check = kbuild(store, "check", "--format", "json")
    assert check.exit_code == 0
    assert json.loads(check.stdout) == {"schema": "kbuild.check/1", "ok": True, "ran": True, "root": "",
                                        "problems": [], "findings": []}


def test_every_schema_is_documented():
    documented = set(re.findall(r"kbuild\.[a-z]+/\d+", DOCS.read_text()))
    schemas = {value for name, value in vars(answers).items() if name.isupper() and isinstance(value, str)}
    assert schemas and schemas <= documented
