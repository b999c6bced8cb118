"""Both directions of the guard on what a model writes, on a labelled set
(tests/data/markup-probes.json): the source's own words, markup and all, must be built with those
words (kept); what a model adds that its source does not hold must fail the page or be gone from
what is written (harm).

    python benchmarks/markup_guard.py

A summary is cleaned as rules/guard.plain_text does and checked by plain_text_failures; a rewrite
as the reading does (model_markdown, then lost_facts and the grounding code's refusals). Prints
the counts and every probe that went the wrong way.
"""
from __future__ import annotations

import json
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path

PROBES = Path(__file__).resolve().parents[1] / "tests" / "data" / "markup-probes.json"


@dataclass(frozen=True)
class Outcome:
    refused: list[str]  # what the guard refused the text for (nothing: the page is built)
    written: str  # what would stand in the page

    def kept(self, words: list[str]) -> bool:
        return not self.refused and all(w in self.written for w in words)

    def defended(self, forbidden: list[str]) -> bool:
        return bool(self.refused) or not any(f in self.written for f in forbidden)


def judge(field: str, source: str, reply: str) -> Outcome:
    """What the guard does with `reply`, written by a model from `source`."""
    from kbuild.checks.grounding import triage
    from kbuild.checks.links import links_in
    from kbuild.convert.markdown import clean_markdown
    from kbuild.rules.facts import lost_facts
    from kbuild.rules.guard import model_markdown, plain_text, plain_text_failures

    text = clean_markdown(source)  # as text.md holds it
    if field == "summary":
        written = plain_text(reply)
        return Outcome(plain_text_failures(written, text), written)
    with tempfile.TemporaryDirectory() as root:
        store = Path(root) / "kb"
        page = store / "p/facts/doc/fact.md"
        page.parent.mkdir(parents=True)
        (page.parent / "text.md").write_text(text)
        written = model_markdown(reply, page, store, repeats=links_in(text))
    refused = lost_facts(text, written, "A summary of it.") + [why for _, why in triage(written, [text]).refused]
    return Outcome(refused, written)


def evaluate() -> tuple[list[dict[str, object]], list[dict[str, object]]]:
    """The probes that went the right way and those that did not."""
    right, wrong = [], []
    for probe in json.loads(PROBES.read_text())["probes"]:
        outcome = judge(probe["field"], probe["source"], probe["reply"])
        ok = outcome.kept(probe["words"]) if probe["label"] == "keep" else outcome.defended(probe["forbidden"])
        (right if ok else wrong).append({**probe, "refused": outcome.refused, "written": outcome.written})
    return right, wrong


def main() -> None:
    sys.path.insert(0, str(Path(__file__).resolve().parent))
    from installed import use_installed_kbuild

    use_installed_kbuild()
    right, wrong = evaluate()
    for label, what in (("keep", "the source's own words built, markup cleaned"),
                        ("harm", "what a model added refused or gone")):
        total = sum(1 for p in right + wrong if p["label"] == label)
        good = sum(1 for p in right if p["label"] == label)
        print(f"{label}: {good} of {total} ({what})")
    for probe in wrong:
        print(f"WRONG {probe['label']} {probe['field']}: {probe['reply']!r} -> {probe['written']!r}, "
              f"refused: {probe['refused']}")


if __name__ == "__main__":
    main()
