"""Two commands that write a project's sources.yml or notes at once (issue 50): neither loses
the other's change. Each trial runs two real processes, started together past a barrier, with
the read-to-write window of each widened (a pause after it reads), so that without a lock they
would both read the same version every time."""
from __future__ import annotations

import json
import multiprocessing
import time
from pathlib import Path

import pytest
from conftest import kbuild
from documents import PAYMENTS, small_store

TRIALS = 4
AGENT = {"by": "claude-code", "origin": "agent"}


def _run(barrier, root: str, args: list[str], widen: str, out: str) -> None:
    """In a forked process: `kbuild ARGS` once both processes are ready, with `widen` (a module
    attribute) pausing after it returns, so the other process reads meanwhile when nothing stops it."""
    import importlib

    module_name, _, name = widen.rpartition(".")
    module = importlib.import_module(module_name)
    real = getattr(module, name)

    def slow(*a, **k):
        value = real(*a, **k)
        time.sleep(0.2)  # widens the race, not a deadline: nothing is asserted about time
        return value

    setattr(module, name, slow)
    barrier.wait()
    result = kbuild(Path(root), *args)
    Path(out).write_text(json.dumps({"code": result.exit_code, "output": result.output}))


def together(root: Path, widen: str, *commands: list[str]) -> list[dict]:
    context = multiprocessing.get_context("fork")
    barrier = context.Barrier(len(commands))
    outs = [root / f"out-{n}.json" for n in range(len(commands))]
    processes = [context.Process(target=_run, args=(barrier, str(root), args, widen, str(out)))
                 for args, out in zip(commands, outs)]
    for p in processes:
        p.start()
    for p in processes:
        p.join(timeout=120)
        assert p.exitcode == 0
    return [json.loads(out.read_text()) for out in outs]


@pytest.fixture(scope="module")
def shop(tmp_path_factory) -> Path:
    root = tmp_path_factory.mktemp("shop")
    small_store(root, {"payments.md": PAYMENTS})
    return root


def test_two_appends_on_one_revision_at_once_one_is_applied_and_the_other_refused(shop):
    note = shop / "kb/shop/notes/payout.md"
    for trial in range(TRIALS):
        note.unlink(missing_ok=True)
        sources = shop / "kb/shop/sources.yml"
        sources.write_text(sources.read_text().split("  - id: payout\n")[0])
        (shop / "add.json").write_text(json.dumps({"schema": "kbuild.delta/1", "project": "shop", "actions": [
            {"action": "add", "note": "payout", "base_revision": 0, "title": "Payout", "text": "Refunds are paid.",
             "provenance": AGENT}]}))
        assert kbuild(shop, "learn", "add.json").exit_code == 0
        for who in ("first", "second"):
            (shop / f"{who}.json").write_text(json.dumps({"schema": "kbuild.delta/1", "project": "shop", "actions": [
                {"action": "append", "note": "payout", "base_revision": 1, "text": f"Appended by the {who}.",
                 "provenance": AGENT}]}))
        answers = together(shop, "kbuild.notes.note.read", ["learn", "first.json"], ["learn", "second.json"])
        codes = sorted(a["code"] for a in answers)
        assert codes == [0, 1], (trial, answers)  # one applied; the other refused, not both accepted
        refused = next(a["output"] for a in answers if a["code"])
        assert "is at revision 2, but the delta was written against revision 1" in refused, refused
        text = note.read_text()
        assert "revision: 2" in text and text.count("Appended by the") == 1, text
        assert "Appended by the" in refused  # the loser is shown the current text, with the winner's words


def test_two_adds_at_once_both_stay_listed(shop):
    sources = shop / "kb/shop/sources.yml"
    for name in ("a", "b"):
        (shop / f"{name}.md").write_text(f"# {name}\n\nText {name}.\n")
    for trial in range(TRIALS):
        for name in ("a", "b"):
            kbuild(shop, "remove", "shop", name)
        answers = together(shop, "kbuild.store.sources.parse", ["add", "shop", "a.md"], ["add", "shop", "b.md"])
        assert [a["code"] for a in answers] == [0, 0], (trial, answers)
        listed = sources.read_text()
        assert "id: a\n" in listed and "id: b\n" in listed and "id: payments\n" in listed, (trial, listed)
