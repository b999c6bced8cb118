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

And the concept pages (rules/concepts.py):

5. Duplicate concepts on the labelled alias set of tests/data/concept-aliases.json: the names of
   one thing that still make two concepts, as a share of the labelled things (aim: at most 2%),
   and the different things made one (aim: none).
6. A store of the OWASP sheets (../shared/corpus-wild/owasp, else the 8 of tests/data/wild/owasp)
   built offline as two projects, the first's concept pages quoting the second (`concepts:
   {across: [...]}`): the share of concept statements whose every link opens a fact page that
   exists (aim: 100%), and what an edit of one sentence of one source rebuilds (concept_page
   queries run and pages rewritten, out of how many).
"""
from __future__ import annotations

import json
import os
import re
import sys
import tempfile
from collections import Counter
from pathlib import Path

from click.testing import CliRunner

from kbuild.cli import main as kbuild_main
from kbuild.text.disagreement import candidate

DATA = Path(__file__).resolve().parents[1] / "tests" / "data" / "disagreement-pairs.json"
CORPUS = Path(__file__).resolve().parents[2] / "shared" / "corpus-wild" / "owasp"  # optional: real documents unedited
REPOSITORY = Path(__file__).resolve().parents[1]
ALIASES = DATA.parent / "concept-aliases.json"
SHEETS = DATA.parent / "wild" / "owasp"  # the concept store's documents when CORPUS is not there
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
    duplicate_concepts()
    concept_store(CORPUS if CORPUS.is_dir() else SHEETS)


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


def duplicate_concepts() -> None:
    """The labelled alias set scored as tests/test_concepts.py scores it: how many concepts each
    labelled thing makes beyond one, and how many labelled different things share a concept."""
    from kbuild.text.concepts import Names

    labelled = json.loads(ALIASES.read_text())
    names = Names()
    for short, spelled in labelled["glossary"]:
        names.join(short, spelled)
    concepts = [{names.of(n) for n in group} for group in labelled["same"]]
    duplicates = sum(len(c) - 1 for c in concepts)
    merged = sum(names.of(a) == names.of(b) for a, b in labelled["different"])
    print(f"alias set: {len(concepts)} things, {sum(map(len, labelled['same']))} names: {duplicates} duplicate concepts "
          f"({100 * duplicates / len(concepts):.1f}%, aim at most 2%); {merged} of {len(labelled['different'])} "
          "pairs of different things made one")


STATEMENT = re.compile(r"^- .*\]\([^)]*\.md\)\)$|^- .*: not built; run `kbuild` to see why\)$")


def statement_links(root: Path) -> tuple[int, int, int]:
    """Over every concept page of the store: (statements, those whose every link opens a fact page
    that exists, those quoting another project). A statement is a line of a page's sections or
    its definition's line, each ending in its fact's link (or naming a fact not built)."""
    total = linked = across = 0
    kb = (root / "kb").resolve()
    for page in sorted(root.glob("kb/*/concepts/*.md")):
        if page.name == "index.md":
            continue
        project = page.parent.parent.name
        for line in page.read_text().splitlines():
            if not (STATEMENT.match(line) or line.startswith("**") and line.endswith(".md))")):
                continue
            targets = [(page.parent / t).resolve() for t in re.findall(r"\]\(([^)]+\.md)\)", line)
                       if not t.startswith(("index.md", "../index.md"))]
            facts = [t for t in targets if t.parent.parent.name == "facts" and t.parent.parent.parent.parent == kb]
            total += 1
            linked += bool(facts) and len(facts) == len(targets) and all(t.is_file() for t in facts)
            across += any(t.parent.parent.parent.name != project for t in facts)
    return total, linked, across


def concept_store(folder: Path) -> None:
    """The sheets as two projects, built; the links of every concept statement; one edit."""
    import shutil
    import time

    documents = sorted(folder.glob("*.md"))
    first, second = documents[:-3], documents[-3:]
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        run(root, "init", str(root))
        for project, docs in (("sheets", first), ("more", second)):
            for doc in docs:
                shutil.copyfile(doc, root / doc.name)
                run(root, "add", project, doc.name)
        sources = root / "kb/sheets/sources.yml"
        sources.write_text(sources.read_text() + "concepts:\n  across: [more]\n")
        started = time.perf_counter()
        built = json.loads(run(root, "build", "--json").split("\nkbuild:")[0])
        took = time.perf_counter() - started
        pages = sorted(p for p in root.glob("kb/*/concepts/*.md") if p.name != "index.md")
        total, linked, across = statement_links(root)
        print(f"concept store: {len(first)} + {len(second)} documents of {os.path.relpath(folder, REPOSITORY)} as projects "
              f"sheets and more (sheets' concepts across: [more]), built offline in {took:.0f} s "
              f"({len(built['executed'])} queries): {len(pages)} concept pages, {total} statements, {across} of them "
              f"quoting the other project; {linked} of {total} ({100 * linked / max(total, 1):.1f}%, aim 100%) link "
              "only to fact pages that exist")
        queries = Counter(q.split("(")[0] for q in built["executed"])
        for project, docs in (("sheets", first), ("more", second)):
            one_edit(root, project, [root / d.name for d in docs], queries)


def one_edit(root: Path, project: str, documents: list[Path], queries: Counter[str]) -> None:
    """One sentence of one of `documents` that a concept page of sheets quotes, edited, built again: the
    concept queries that ran against those of a whole build (`queries`), and the pages rewritten."""
    pages = sorted(p for p in root.glob("kb/*/concepts/*.md") if p.name != "index.md")
    before = {p: p.read_bytes() for p in pages}
    # a sentence quoted on a page of sheets: in more, one its concept pages quote across projects
    edited, sentence = edited_sentence(documents, [p for p in pages if p.parent.parent.name == "sheets"])
    if edited is None:
        print(f"one-source edit in {project}: no statement of a concept page stands word for word in its document")
        return
    edited.write_text(edited.read_text().replace(sentence, sentence[:-1] + " in every release.", 1))
    report = json.loads(run(root, "build", "--json").split("\nkbuild:")[0])
    ran = Counter(q.split("(")[0] for q in report["executed"])
    rewritten = sorted(p.relative_to(root / "kb").as_posix() for p in pages if before[p] != p.read_bytes())
    print(f"one sentence of {edited.name} (project {project}) edited: {len(report['executed'])} queries ran; "
          + ", ".join(f"{rule} {ran[rule]} of {queries[rule]}" for rule in ("fact_concepts", "concept_citations", "concept_page"))
          + f"; {len(rewritten)} of {len(pages)} concept pages rewritten ({', '.join(rewritten)})")


def edited_sentence(documents: list[Path], pages: list[Path]) -> tuple[Path | None, str]:
    """One of `documents` and a sentence of it that a concept page quotes word for word: the
    first such, in page order, so that the edit reaches at least one page."""
    texts = {d: d.read_text() for d in documents}
    for page in pages:
        for line in page.read_text().splitlines():
            if STATEMENT.match(line):
                sentence = line[2:].rsplit(" ([", 1)[0]
                if sentence.endswith(".") and len(sentence) > 40:
                    for document, text in texts.items():
                        if text.count(sentence) == 1:
                            return document, sentence
    return None, ""


if __name__ == "__main__":
    main()
