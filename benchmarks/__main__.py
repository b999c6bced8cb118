"""Every figure of the performance issue in one run: printed as one Markdown table, and each
figure's table written into docs/benchmarks.md under the command and the machine that made it.

    python -m benchmarks                 # all figures (about 20 minutes on 2 cores)
    python -m benchmarks --quick         # smaller sizes, no revision replay (about 3 minutes)
    python -m benchmarks --only noop pull scheduling

A run replaces only the blocks of the figures it ran (`<!-- figure NAME -->` to `<!-- end NAME -->`);
the rest of docs/benchmarks.md, the tables measured by hand, stays as written. Each figure's script
in this folder runs on its own too, with more detail. Ratios are measured within one run (these
machines are shared and noisy); times are medians of several runs. Figures that read ../shared/corpus
are left out when it is not there.
"""
from __future__ import annotations

import argparse
import datetime
import os
import platform
import re
import statistics
import sys
import time
from collections.abc import Callable
from pathlib import Path

# Installed kbuild runs from compiled bytecode (pip compiles it at install); this machine's
# environment turns bytecode caching off, which would add about a second of compiling to every
# fresh process measured here.
os.environ.pop("PYTHONDONTWRITEBYTECODE", None)
HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
from installed import use_installed_kbuild  # noqa: E402

use_installed_kbuild()  # not the checkout's kbuild/, which lacks kbuild.rules

Row = tuple[str, str, str]  # (what was measured, the result, the aim or the anchor)
CORPUS = HERE.parent.parent / "shared" / "corpus"
DOC = HERE.parent / "docs" / "benchmarks.md"


def noop_and_memory(quick: bool) -> dict[str, list[Row]]:
    import noop

    sizes = [1_000, 10_000] if quick else [1_000, 10_000, 100_000]
    results = [noop.run_size(n, 3) for n in sizes]
    noop_rows = [(f"{r['queries']:,} queries, {r['inputs']:,} files",
                  f"{1000 * r['build_s']:.0f} ms; `git status` {1000 * r['git_status_s']:.0f} ms "
                  f"({r['build_s'] / r['git_status_s']:.1f}×); graph not loaded",
                  "within 2× `git status`; graph load under 1/4 of it") for r in results]
    growth = ", ".join(f"{r['queries'] // 1000}k: {r['cold_rss_mb']:.0f} MB" for r in results)
    memory_rows = [(f"peak RSS of a cold build at {results[-1]['queries']:,} queries",
                    f"{results[-1]['cold_rss_mb']:.0f} MB ({growth}); no-op {results[-1]['rss_mb']:.0f} MB",
                    "under 1 GB at 100k")]
    return {"1. No-op build": noop_rows, "7. Memory": memory_rows}


def pull(quick: bool) -> dict[str, list[Row]]:
    import pull as bench

    points = [(1_000, 10), (10_000, 10), (10_000, 1), (10_000, 100)] if quick else bench.CURVE
    rows = []
    for pages, changed in points:
        r = bench.measure(pages, changed, 3)
        rows.append((f"{changed} sources changed in {r['pages']:,} pages",
                     f"{r['build_s']:.3f} s, {r['ran']:.0f} queries ran; no-op {r['noop_s']:.3f} s; "
                     f"lock {r['lock_mb']:.1f} MB",
                     "grows with the changes, not the store"))
    return {"2. After `git pull`": rows}


def scheduling(quick: bool) -> dict[str, list[Row]]:
    import scheduling as bench

    rows = []
    for in_flight in (1, 4, 16):
        chunks = 200 if quick and in_flight == 1 else 1000
        for memory in (False, True):
            took, ideal = statistics.median_low([bench.measure(chunks, 0.02, in_flight, memory) for _ in range(3)])
            rows.append((f"{chunks:,} calls of 20 ms, {in_flight} in flight, store on {'tmpfs' if memory else 'disk'}",
                         f"{100 * ideal / took:.0f}% of ideal ({took:.2f} s against {ideal:.2f} s)",
                         "at least 90% of ideal"))
    b = bench.breakdown(1000, 0.02, 16)
    rows.append(("where the rest goes at 16 in flight, 20 ms, tmpfs",
                 f"{b['in_flight']:.1f} calls in flight once they began; the first began "
                 f"{1000 * b['first_call_s']:.0f} ms in; calls ended {b['late_ms']:.1f} ms late; the build ended "
                 f"{1000 * b['end_after_last_call_s']:.0f} ms after the last call; "
                 f"{b['cpu_ms_per_query']:.2f} ms CPU a query; plain asyncio semaphore {100 * b['plain_asyncio']:.0f}%",
                 ""))
    if not quick:  # a small model's latency rather than a stress test of kbuild's own cost per call
        took, ideal = bench.measure(1000, 0.2, 16)
        rows.append(("1,000 calls of 200 ms, 16 in flight, store on disk",
                     f"{100 * ideal / took:.0f}% of ideal ({took:.2f} s against {ideal:.2f} s)", "at least 90% of ideal"))
    return {"3. Cold-build scheduling": rows}


def incremental(quick: bool) -> dict[str, list[Row]]:
    import edit_replay

    rows = [(f"one-sentence edit in a document of {chunks:,} chunks",
             f"{facts} facts rewritten, {calls} model calls, {tokens:,} tokens in", "flat in the document's size")
            for chunks, facts, calls, tokens in edit_replay.flat([10, 100] if quick else [10, 100, 1000])]
    if not quick and CORPUS.is_dir():
        rows += [(f"every revision of {r['document']} ({r['revisions']})",
                  f"{r['calls']:,} model calls: {100 * r['calls'] / r['full']:.0f}% of full rebuilds, "
                  f"{100 * r['calls'] / r['whole']:.0f}% of re-processing the changed document",
                  "what the change demands") for r in edit_replay.replay(CORPUS)]
    return {"4. Incremental cost": rows}


def amplification(quick: bool) -> dict[str, list[Row]]:
    import amplification as bench

    if not CORPUS.is_dir():
        return {}
    source_tokens, by_model = bench.ratios(CORPUS)
    rows = []
    for model, tokens in by_model.items():
        counts = {k: tokens.pop(k) for k in ("pages failed", "sentences asked", "sentences cleared")}
        parts = ", ".join(f"{task} {n / source_tokens:.2f}×" for task, n in sorted(tokens.items()) if task != "all")
        rows.append((f"{model} model: all requests as sent ({tokens['all']:,} tokens)",
                     f"{tokens['all'] / source_tokens:.2f}× ({parts}); grounding asked about "
                     f"{counts['sentences asked']:,} sentences, code cleared {counts['sentences cleared']:,}",
                     "at most 2.5× (aim 2×)"))
    return {f"5. Token amplification ({source_tokens:,} source tokens)": rows}


def conversion(quick: bool) -> dict[str, list[Row]]:
    import convert as bench

    r = bench.measure(100 if quick else 200, 3)
    return {"6. Conversion": [(f"a {r['pages']}-page PDF: text, page images, tables, figures",
                               f"{r['convert_pps']:.0f} pages/s against {r['plain_pps']:.0f} for plain "
                               f"`get_text()`: {r['ratio']:.2f}", "at least 0.5")]}


def others(quick: bool) -> dict[str, list[Row]]:
    import check
    import meaning
    import search
    import watch

    figures: dict[str, list[Row]] = {}
    c = check.measure(2_000 if quick else 10_000, 3)
    figures["`kbuild check` on a fresh clone"] = [(f"{c['facts']:,} facts, {c['files']:,} files",
                                                    f"{c['check_s']:.2f} s; `git status` {c['git_s']:.3f} s "
                                                    f"({c['check_s'] / c['git_s']:.0f}×)", "")]
    lines = 10_000 if quick else 100_000
    seconds, _, parts = search.measure(lines, 3)
    figures["Search"] = [(f"one query over {lines:,} index lines", f"{seconds:.2f} s; of it "
                          + ", ".join(f"{name} {t:.2f} s" for name, t in parts.items()), "")]
    latency = watch.measure(5 if quick else 10, 50)
    figures["Watch"] = [("a save to the start of its rebuild", f"{1000 * latency:.0f} ms (50 ms of it the debounce)", "")]
    m = meaning.scores()
    figures["Same-meaning classifier"] = [(f"{m['pairs']} labelled real edits",
                                           f"precision of same {m['precision']:.2f}, recall {m['recall']:.2f}",
                                           "precision 1.0")]
    if CORPUS.is_dir():
        import create

        r = create.throughput(CORPUS, 3)
        figures["Create pipeline (offline backend)"] = [
            (f"{r['documents']} documents, {r['kib']:.0f} KiB, {r['facts']} facts",
             f"cold build {r['cold_s']:.2f} s ({r['facts'] / r['cold_s']:.0f} facts/s), no-op {r['noop_s']:.3f} s", "")]
    return figures


def commands(quick: bool) -> dict[str, list[Row]]:
    import commands as bench

    rows = []
    for facts in [130] if quick else [130, 1040, 4940]:
        r = bench.measure(facts, 3)[0]
        git, noop = r["git status"], r["kbuild no-op"]
        ninja = f", ninja {1000 * r['ninja no-op']:.0f} ms" if "ninja no-op" in r else ""
        rows += [
            (f"`kbuild` no-op, {r['facts']:,} facts", f"{1000 * noop:.0f} ms; `git status` {1000 * git:.0f} ms "
             f"({noop / git:.1f}×){ninja}", "within 3× `git status` at 130 facts, 2× from 1,000"),
            (f"`kbuild check` on a fresh clone, {r['facts']:,} facts",
             f"{r['kbuild check (fresh clone)']:.2f} s ({r['kbuild check (fresh clone)'] / git:.0f}× `git status`)",
             "within 5× `git status`"),
            (f"`kbuild status`, {r['facts']:,} facts", f"{1000 * r['kbuild status']:.0f} ms "
             f"({r['kbuild status'] / noop:.1f}× the no-op)", "within 3× the no-op"),
            (f"`kbuild` after a pull of one changed source, {r['facts']:,} facts",
             f"{r['kbuild after a pull']:.2f} s ({r['kbuild after a pull'] / noop:.1f}× the no-op)",
             "what differs, not the store"),
            (f"`kbuild --help`, `--version`, {r['facts']:,} facts",
             f"{1000 * r['kbuild --help']:.0f} ms, {1000 * r['kbuild --version']:.0f} ms", "under 100 ms"),
        ]
    return {"0. Whole commands (interleaved with `git status`)": rows}


FIGURES: dict[str, Callable[[bool], dict[str, list[Row]]]] = {
    "commands": commands, "noop": noop_and_memory, "pull": pull, "scheduling": scheduling, "incremental": incremental,
    "amplification": amplification, "convert": conversion, "others": others,
}


def main() -> None:
    parser = argparse.ArgumentParser(prog="python -m benchmarks", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--quick", action="store_true", help="smaller sizes, no revision replay")
    parser.add_argument("--only", nargs="*", choices=list(FIGURES), default=list(FIGURES))
    parser.add_argument("--out", type=Path, default=DOC, help="the page whose figure blocks are replaced "
                        "(default docs/benchmarks.md)")
    parser.add_argument("--no-write", action="store_true", help="print the table only")
    args = parser.parse_args()
    command = " ".join(["python -m benchmarks", *(["--quick"] if args.quick else []),
                        *(["--only", *args.only] if args.only != list(FIGURES) else [])])
    table: dict[str, list[Row]] = {}
    blocks: dict[str, str] = {}
    for name in args.only:
        started = time.perf_counter()
        print(f"running {name} ...", file=sys.stderr, flush=True)
        try:
            figures = FIGURES[name](args.quick)
        except (Exception, SystemExit) as exc:  # one broken figure must not lose the others' numbers
            figures = {name: [("failed", _one_line(f"{type(exc).__name__}: {exc}"), "")]}
        took = time.perf_counter() - started
        table.update(figures)
        blocks[name] = _block(name, figures, command, took)
        print("\n".join(_lines(figures)), f"\n  ({name}: {took:.0f} s)", file=sys.stderr, flush=True)
    print("| figure | measured | result | aim or anchor |")
    print("|---|---|---|---|")
    print("\n".join(_lines(table)))
    if not args.no_write:
        args.out.write_text(replace_blocks(args.out.read_text() if args.out.exists() else "", blocks))
        print(f"wrote {len(blocks)} figure(s) into {args.out}", file=sys.stderr)


def machine() -> str:
    """What a reader needs to compare a figure with their own: cores, Python, system, day."""
    return (f"{os.cpu_count()} CPUs, Python {platform.python_version()}, {platform.system()} "
            f"{platform.machine()}, {datetime.date.today().isoformat()}")


def _block(name: str, figures: dict[str, list[Row]], command: str, took: float) -> str:
    return "\n".join([f"<!-- figure {name} -->", f"### {name}", "",
                      f"`{command}` on {machine()} ({took:.0f} s for this figure)", "",
                      "| figure | measured | result | aim or anchor |", "|---|---|---|---|",
                      *_lines(figures), f"<!-- end {name} -->"])


def replace_blocks(page: str, blocks: dict[str, str]) -> str:
    """The page with each figure's block replaced where it stands, a new figure's added at the end."""
    for name, block in blocks.items():
        pattern = re.compile(rf"<!-- figure {re.escape(name)} -->.*?<!-- end {re.escape(name)} -->", re.S)
        if pattern.search(page):
            page = pattern.sub(lambda _: block, page)
        else:
            page = page.rstrip("\n") + ("\n\n" if page.strip() else "") + block + "\n"
    return page


def _one_line(text: str, width: int = 300) -> str:
    """A failure as a table cell: one line (a figure's SystemExit may carry a command's output)."""
    line = " ".join(text.split()).replace("|", "\\|")
    return line if len(line) <= width else line[:width] + " ..."


def _lines(table: dict[str, list[Row]]) -> list[str]:
    return [f"| {figure if n == 0 else ''} | {what} | {result} | {aim} |"
            for figure, rows in table.items() for n, (what, result, aim) in enumerate(rows)]


if __name__ == "__main__":
    main()
