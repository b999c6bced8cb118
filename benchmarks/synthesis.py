"""The contradiction check on labelled pairs: precision, recall, and what a one-source edit rebuilds.

    python benchmarks/synthesis.py [-v]

1. The pairs of tests/data/disagreement-pairs.json (a sentence of a real document against the
   same sentence edited to disagree, or reworded): the code's verdict
   (kbuild.text.disagreement.candidate, which is the offline verdict) against the label.
2. The same sentences as a store of three sources (the originals, the edits that disagree, the
   rewordings), each sentence its own fact, built offline: the disagreements `kbuild check`
   reports against those expected (an original and its disagreeing edit; a rewording and that
   edit), every pair of the store compared, not only the labelled ones.
3. One sentence of one source edited (to disagree otherwise, then back to agree), built again:
   which contradiction queries ran.
4. Where ../shared/corpus-wild/owasp is there: its documents as they stand, every pair of
   statements of two documents compared: what code flags (no label: to read).
"""
from __future__ import annotations

import json
import sys
import tempfile
from collections import Counter
from pathlib import Path

from click.testing import CliRunner

from kbuild.cli import main as kbuild_main
from kbuild.text.disagreement import candidate

DATA = Path(__file__).resolve().parents[1] / "tests" / "data" / "disagreement-pairs.json"
CORPUS = Path(__file__).resolve().parents[2] / "shared" / "corpus-wild" / "owasp"  # optional: real documents unedited
PROJECT = "pairs"
RULES = ("fact_claims", "disagreement_candidates", "disagreement_verdict", "project_disagreements")


def scores(found: set[tuple[str, str]], expected: set[tuple[str, str]]) -> tuple[float, float]:
    right = len(found & expected)
    return (right / len(found) if found else 1.0), (right / len(expected) if expected else 1.0)


def labelled(pairs: list[dict]) -> tuple[float, float, list[str]]:
    """Precision and recall of the code's verdict on the labelled pairs, and the pairs it got wrong."""
    said = {p["name"] for p in pairs if candidate(p["first"], p["second"]) is not None}
    truth = {p["name"] for p in pairs if p["disagree"]}
    precision, recall = scores({(n, "") for n in said}, {(n, "") for n in truth})
    wrong = [f"{p['name']}: labelled {'disagree' if p['disagree'] else 'agree'}: {candidate(p['first'], p['second'])}"
             for p in pairs if (p["name"] in said) != p["disagree"]]
    return precision, recall, wrong


def run(root: Path, *args: str) -> str:
    return CliRunner().invoke(kbuild_main, ["-C", str(root), *args]).output


def document(title: str, sentences: dict[str, str]) -> str:
    return f"# {title}\n\n" + "".join(f"## {name}\n\n{text}\n\n" for name, text in sentences.items())


def store(root: Path, pairs: list[dict]) -> tuple[dict[str, str], dict[str, dict[str, str]]]:
    """The three sources, built: (sentence -> its side and name, each source's sentences)."""
    originals = {p["name"].rsplit("-", 1)[0]: p["first"] for p in pairs}
    sources = {"original": originals,
               "disagreeing": {p["name"].rsplit("-", 1)[0]: p["second"] for p in pairs if p["disagree"]},
               "reworded": {p["name"].rsplit("-", 1)[0]: p["second"] for p in pairs if not p["disagree"]}}
    run(root, "init", str(root))
    kbuildfile = root / "Kbuildfile.py"
    kbuildfile.write_text(kbuildfile.read_text().replace("floor_tokens=2000, cap_tokens=4000",
                                                         "floor_tokens=15, cap_tokens=60"))
    for name, sentences in sources.items():
        (root / f"{name}.md").write_text(document(name.capitalize(), sentences))
        run(root, "add", PROJECT, f"{name}.md")
    run(root, "build")
    where = {text: f"{source}:{name}" for source, sentences in sources.items() for name, text in sentences.items()}
    return where, sources


def reported(root: Path, where: dict[str, str]) -> set[tuple[str, str]]:
    """The disagreements `kbuild check` reports, as pairs of (source:name)."""
    report = json.loads(run(root, "check", "--format", "json").split("\nkbuild:")[0])
    found = set()
    for finding in report["findings"]:
        if finding["kind"] == "contradiction":
            named = sorted(label for text, label in where.items() if f"\"{text}\"" in finding["reason"])
            found.add(tuple(named) if len(named) == 2 else (finding["reason"][:80], "?"))
    return found


def main() -> None:
    pairs = json.loads(DATA.read_text())["pairs"]
    precision, recall, wrong = labelled(pairs)
    disagree = sum(p["disagree"] for p in pairs)
    print(f"labelled pairs: {disagree} disagreements, {len(pairs) - disagree} rewordings")
    print(f"  code verdict (offline): precision {precision:.2f}, recall {recall:.2f}")
    for line in wrong:
        print(f"  wrong: {line}")
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        where, sources = store(root, pairs)
        expected = {tuple(sorted((f"original:{n}", f"disagreeing:{n}"))) for n in sources["disagreeing"]}
        expected |= {tuple(sorted((f"reworded:{n}", f"disagreeing:{n}"))) for n in sources["disagreeing"]
                     if n in sources["reworded"]}
        found = reported(root, where)
        precision, recall = scores(found, expected)
        print(f"store of 3 sources, {sum(len(s) for s in sources.values())} sentences, every pair compared: "
              f"`kbuild check` reports {len(found)} disagreements, {len(expected)} expected: "
              f"precision {precision:.2f}, recall {recall:.2f}")
        if "-v" in sys.argv:
            for pair in sorted(found - expected):
                print(f"  reported, not expected: {pair}")
            for pair in sorted(expected - found):
                print(f"  expected, not reported: {pair}")
        edited = root / "disagreeing.md"
        name, text = "forms", sources["disagreeing"]["forms"]
        for what, new in (("edited to disagree otherwise (30 minutes -> 40 minutes)", text.replace("30", "40")),
                          ("edited back to agree", sources["original"][name])):
            edited.write_text(edited.read_text().replace(text, new))
            text = new
            report = json.loads(run(root, "build", "--json").split("\nkbuild:")[0])
            ran = Counter(q.split("(")[0] for q in report["executed"])
            print(f"one sentence of one source {what} ({name}): the build ran {len(report['executed'])} queries; "
                  "of the contradiction rules: " + ", ".join(f"{rule} {ran[rule]}" for rule in RULES)
                  + f" (of {len(where)} facts' claims and {len(expected)} verdicts); `kbuild check` then reports "
                  f"{len(reported(root, where))} disagreements")
            if "-v" in sys.argv:
                print("  ran: " + ", ".join(q for q in report["executed"] if q.split("(")[0] in RULES))
    if CORPUS.is_dir():
        unedited(CORPUS)


def unedited(folder: Path) -> None:
    """Real documents as they stand, every pair of two documents compared: what the code flags."""
    from collections import defaultdict

    from kbuild.text.disagreement import claim, compare, force
    from kbuild.text.prose import prose_sentences
    from kbuild.text.quantities import quantities

    read = [(f.stem, claim(s)) for f in sorted(folder.glob("*.md")) for s in prose_sentences(f.read_text())
            if quantities(s) or force(s)]
    by_word: dict[str, list[int]] = defaultdict(list)
    for n, (_, said) in enumerate(read):
        for word in said.subject:
            by_word[word].append(n)
    flagged = [(said, read[m][1], found) for n, (doc, said) in enumerate(read)
               for m in sorted({m for w in said.subject for m in by_word[w] if m > n}) if read[m][0] != doc
               and (found := compare(said, read[m][1])) is not None]
    print(f"{len(list(folder.glob('*.md')))} unedited documents of {folder.name} ({len(read)} statements with a "
          f"limit or an obligation): code flags {len(flagged)} pairs for the judge")
    for first, second, found in flagged:
        print(f"  {found.describe()}: \"{first.sentence[:90]}\" / \"{second.sentence[:90]}\"")


if __name__ == "__main__":
    main()
