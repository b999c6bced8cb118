"""The kbuild command line.

Exit codes: 0 done; 1 the build or a check failed (CI should stop); 2 the command or the
Kbuildfile is wrong; 3 another kbuild holds the store.
"""
from __future__ import annotations

import json
import sys
import time
from pathlib import Path
from typing import Any, NoReturn

import click

from . import buildfile
from .engine import BuildLocked, BuildStopped, Change, Engine, FileRead, LockError, Problem, Query, Report, to_graph


class Session:
    def __init__(self, directory: Path, file: Path | None, debug: bool, quiet: bool = False,
                 verbose: bool = False) -> None:
        self.directory = directory
        self.file = file
        self.debug = debug
        self.quiet = quiet
        self.verbose = verbose

    def load(self) -> tuple[buildfile.Buildfile, Engine]:
        try:
            path = self.file or buildfile.find(self.directory.resolve())
            spec = buildfile.load(path)
        except buildfile.BuildfileError as exc:
            if self.debug and exc.__cause__:
                raise
            fail(str(exc), code=2)
        return spec, Engine(spec.root, spec.rules, max_calls=spec.max_calls, output_folder=spec.output_folder)

    def targets(self, spec: buildfile.Buildfile) -> list[Query]:
        try:
            targets = list(spec.targets())
        except Exception as exc:
            if self.debug:
                raise
            fail(f"targets() in {spec.path} failed: {type(exc).__name__}: {exc}", code=2)
        bad = [t for t in targets if not isinstance(t, Query)]
        if bad:
            fail(f"targets() in {spec.path} must return queries (rule(key)), got {bad[0]!r}", code=2)
        return targets


def fail(message: str, code: int = 1) -> NoReturn:
    click.secho(f"kbuild: {message}", fg="red", err=True)
    sys.exit(code)


@click.group(invoke_without_command=True)
@click.option("-C", "--directory", type=click.Path(file_okay=False, path_type=Path), default=Path("."),
              help="Run as if started in this folder.")
@click.option("-f", "--file", "file", type=click.Path(dir_okay=False, path_type=Path),
              help="The Kbuildfile.py to use (default: found in this folder or above).")
@click.option("--debug", is_flag=True, help="Show tracebacks.")
@click.option("-q", "--quiet", is_flag=True, help="Print only failures.")
@click.option("-v", "--verbose", is_flag=True, help="Print every query that ran and why.")
@click.pass_context
def main(ctx: click.Context, directory: Path, file: Path | None, debug: bool, quiet: bool, verbose: bool) -> None:
    """Build a knowledge base. With no command: bring the whole store up to date.

    Example: kbuild -C myproject   (then: kbuild check, kbuild watch, kbuild search "...")
    """
    ctx.obj = Session(directory, file, debug, quiet, verbose)
    if ctx.invoked_subcommand is None:
        ctx.invoke(build)


@main.command()
@click.option("-n", "--dry-run", is_flag=True, help="Say what would run and why; run nothing.")
@click.option("--json", "as_json", is_flag=True, help="Print the build report as JSON.")
@click.option("--refresh", is_flag=True, help="Ask the model again instead of using cached answers.")
@click.option("--no-fetch", is_flag=True, help="Do not download url sources again; use the copies in raw/.")
@click.option("--cutoff", type=click.Choice(["meaning", "exact"]), default="meaning", show_default=True,
              help="exact: a rebuilt page stops the climb only when it is byte for byte the same.")
@click.pass_obj
def build(session: Session, dry_run: bool = False, as_json: bool = False, refresh: bool = False,
          no_fetch: bool = False, cutoff: str = "meaning") -> None:
    """Bring the store up to date (the command to run after `git pull`).

    Example: kbuild build --dry-run   (then: kbuild build)
    """
    spec, engine = session.load()
    engine.cutoff_hooks = cutoff == "meaning"
    fetch_problems = [] if dry_run or no_fetch or spec.before_build is None else spec.before_build()
    for problem in fetch_problems:
        click.secho(f"failed: {problem}", fg="red", err=True)
    targets = session.targets(spec)
    if dry_run:
        print_plan(engine, targets, as_json)
        return
    show = sys.stderr.isatty() and not as_json and not session.quiet
    progress = Progress(enabled=show, total=len(engine.plan(targets)) if show else None)
    try:
        report = engine.build(targets, refresh=refresh, observer=progress)
    except BuildLocked as exc:
        fail(str(exc), code=3)
    except LockError as exc:
        fail(str(exc), code=2)
    except BuildStopped as exc:
        fail(str(exc), code=1)
    finally:
        progress.close()
    try:
        save_report(engine, report)
    except OSError as exc:  # the build is done; only `explain` loses its history
        click.secho(f"warning: could not save the build report: {exc.strerror or exc}", fg="yellow", err=True)
    harness = spec.namespace.get("harness_file")
    kb = next((v for v in spec.namespace.values() if hasattr(v, "store") and hasattr(v, "projects")), None)
    if harness and report.ok and kb is not None:
        update_harness(spec.root / harness, spec.root, kb.store.index())
    if as_json:
        click.echo(json.dumps(report_json(report), indent=2, sort_keys=True))
    else:
        print_report(report, session.debug, session.quiet, session.verbose)
    if not report.ok or fetch_problems:
        sys.exit(1)


INIT_KBUILDFILE = '''"""The build file of this knowledge base: `kbuild` runs it.

Sources are listed per project in kb/<project>/sources.yml (`kbuild add PROJECT PATH_OR_URL`).
Everything else under kb/ is generated; commit it together with kbuild.lock, so that a fresh
clone (and `kbuild check` in CI) can tell what is stale without a model.
"""
from pathlib import Path

from kbuild.rules import knowledge_base

# The default pipeline: sources -> text -> facts -> summaries -> indexes. With no model
# configured it runs the offline backend (extractive, no network, no key).
# floor_tokens/cap_tokens bound the size of one fact.
kb = knowledge_base(Path(__file__).parent, store="kb", floor_tokens=2000, cap_tokens=4000)

RULES = kb.rules  # every rule the engine should know; add your own rules to this list
targets = kb.targets  # what `kbuild` brings up to date
before_build = kb.before_build  # downloads url sources before each build
max_calls = 4  # model calls in flight at once
# harness_file = "AGENTS.md"  # keep the root index in a marked block of your agent's instruction file
'''

GITIGNORE_LINES = [".kbuild/", "*.kbuild-tmp"]


@main.command()
@click.argument("directory", type=click.Path(file_okay=False, path_type=Path), default=Path("."))
def init(directory: Path) -> None:
    """Start a knowledge base in DIRECTORY: a commented Kbuildfile.py, kb/ and .gitignore lines.

    Example: kbuild init myproject
    """
    directory.mkdir(parents=True, exist_ok=True)
    kbuildfile = directory / buildfile.FILENAME
    if kbuildfile.exists():
        fail(f"{kbuildfile} exists already; edit it, or remove it to start again", code=2)
    kbuildfile.write_text(INIT_KBUILDFILE)
    (directory / "kb").mkdir(exist_ok=True)
    gitignore = directory / ".gitignore"
    present = gitignore.read_text().splitlines() if gitignore.exists() else []
    missing = [line for line in GITIGNORE_LINES if line not in present]
    if missing:
        prefix = "" if not present or gitignore.read_text().endswith("\n") else "\n"
        with gitignore.open("a") as out:
            out.write(prefix + "# kbuild's local state: rebuildable, never committed\n" + "\n".join(missing) + "\n")
    click.echo(f"wrote {kbuildfile}, {directory / 'kb'}/ and .gitignore lines for .kbuild/")
    click.echo("next: kbuild add PROJECT PATH_OR_URL, then kbuild")


@main.command()
@click.argument("project")
@click.argument("path_or_url")
@click.option("--id", "source_id", help="The source's id (default: from its file name).")
@click.pass_obj
def add(session: Session, project: str, path_or_url: str, source_id: str | None) -> None:
    """List a source in kb/PROJECT/sources.yml (creating the project), keeping its comments.

    Example: kbuild add payments docs/requirements.pdf --id requirements
    """
    from urllib.parse import urlparse

    from pydantic import ValidationError

    from .store.layout import BadId, check_id, slugify
    from .store.sources import Source, SourcesError, one_line
    from .store.sources import add as add_source

    spec, _ = session.load()
    kb = next((v for v in spec.namespace.values() if hasattr(v, "store") and hasattr(v, "projects")), None)
    if kb is None:
        fail(f"{spec.path} defines no knowledge base (kb = knowledge_base(...)); see `kbuild init`", code=2)
    is_url = urlparse(path_or_url).scheme in ("http", "https", "file")
    if is_url:
        name = urlparse(path_or_url).path.rstrip("/").rsplit("/", 1)[-1] or urlparse(path_or_url).netloc
        fields = {"url": path_or_url}
    else:
        full = (session.directory / path_or_url).resolve()
        if not full.is_file():
            fail(f"{path_or_url} is not a file; give the path of a document or a url", code=2)
        if not full.is_relative_to(spec.root):
            fail(f"{path_or_url} is outside {spec.root}; copy it into the project or add it by url", code=2)
        name = full.name
        fields = {"path": full.relative_to(spec.root).as_posix()}
    try:
        check_id("project", project)
        source = Source(id=source_id or slugify(name.rsplit(".", 1)[0]), **fields)
        add_source(spec.root / kb.store.sources_file(project), source)
    except ValidationError as exc:
        fail(one_line(exc), code=2)
    except (BadId, SourcesError) as exc:
        fail(str(exc), code=2)
    click.echo(f"added {source.id} to {kb.store.sources_file(project)}; run `kbuild` to build it")


@main.command()
@click.pass_obj
def doctor(session: Session) -> None:
    """Check the setup, read-only: each line PASS, WARN or FAIL with what to do; exit 1 on FAIL.

    Example: kbuild doctor
    """
    import urllib.request

    results: list[tuple[str, str, str]] = []

    def say(status: str, what: str, fix: str = "") -> None:
        results.append((status, what, fix))

    version = sys.version_info
    say("PASS" if version >= (3, 11) else "FAIL", f"Python {version.major}.{version.minor}", "install Python 3.11 or newer")
    try:
        path = session.file or buildfile.find(session.directory.resolve())
        spec = buildfile.load(path)
        say("PASS", f"{path} loads: {len(spec.rules)} rules")
        unreadable = [f"{r.name}: {p}" for r in spec.rules for p in r.prompts if not _readable(p)]
        prompts = {p for r in spec.rules for p in r.prompts}
        if unreadable:
            say("FAIL", f"prompt files cannot be read ({len(unreadable)}): {unreadable[0]}",
                "reinstall kbuild (`pip install --force-reinstall kbuild`), or fix the path the rule names")
        else:
            say("PASS", f"every prompt file the rules name can be read ({len(prompts)})")
        targets = list(spec.targets())
        say("PASS", f"targets(): {len(targets)} queries")
    except Exception as exc:
        say("FAIL", f"the Kbuildfile: {exc}", "run `kbuild init`, or fix the error it names")
        spec = None
    if spec is not None:
        kb = next((v for v in spec.namespace.values() if hasattr(v, "store") and hasattr(v, "projects")), None)
        backend = getattr(kb, "backend", None)
        if backend is None or backend.name == "offline":
            say("PASS", "model: the offline backend (extractive; no network, no key)")
        else:
            url = (backend.settings.base_url or "https://api.openai.com/v1").rstrip("/") + "/models"
            try:
                request = urllib.request.Request(url, headers={"Authorization": f"Bearer {backend.settings.api_key or ''}"})
                urllib.request.urlopen(request, timeout=5).close()
                say("PASS", f"model: {backend.settings.model} at {url} answers")
            except Exception as exc:
                say("WARN", f"model: {url} does not answer ({exc})", "start the server, or check OPENAI_BASE_URL")
        if kb is not None:
            from .store.sources import SourcesError, parse

            for project in kb.projects():
                file = spec.root / kb.store.sources_file(project)
                try:
                    listing = parse(file.read_bytes(), kb.store.sources_file(project))
                    status = "WARN" if listing.problems else "PASS"
                    say(status, f"{kb.store.sources_file(project)}: {len(listing.sources)} sources"
                        + (f"; {listing.problems[0]}" if listing.problems else ""), "fix the entry it names")
                except SourcesError as exc:
                    say("FAIL", str(exc), "fix the YAML")
        gitignore = spec.root / ".gitignore"
        if ".kbuild/" in (gitignore.read_text() if gitignore.exists() else ""):
            say("PASS", ".gitignore keeps .kbuild/ out of git")
        else:
            say("WARN", ".gitignore does not name .kbuild/", "add the line `.kbuild/`")
        engine = Engine(spec.root, spec.rules)
        state_file = engine.state_dir / "state.db"
        if state_file.exists():
            from .engine.state import damage

            damaged = damage(state_file)
            if damaged is None:
                say("PASS", f"{state_file.relative_to(spec.root)}: readable")
            else:
                say("FAIL", f"{state_file.relative_to(spec.root)} is damaged ({damaged})",
                    "run `kbuild`: it drops the local state and rebuilds it from kbuild.lock")
        if engine.lock_path.exists():
            try:
                from .engine import read_lock

                say("PASS", f"kbuild.lock: {len(read_lock(engine.lock_path))} queries")
            except LockError as exc:
                say("FAIL", str(exc), "take either side of the conflict and run `kbuild`")
        else:
            say("WARN", "no kbuild.lock yet", "run `kbuild`, then commit kb/ and kbuild.lock")
    for status, what, fix in results:
        colour = {"PASS": "green", "WARN": "yellow", "FAIL": "red"}[status]
        click.echo(click.style(status, fg=colour) + f"  {what}" + (f"  (fix: {fix})" if status != "PASS" and fix else ""))
    if any(status == "FAIL" for status, _, _ in results):
        sys.exit(1)


def _readable(path: Path) -> bool:
    try:
        path.read_bytes()
        return True
    except OSError:
        return False


@main.command()
@click.option("--cache", is_flag=True, help="Drop the model-call cache too (the next build pays for every call).")
@click.pass_obj
def clean(session: Session, cache: bool) -> None:
    """Drop the local state in .kbuild/ (rebuildable from the lock and the call cache).

    Example: kbuild clean   (kbuild clean --cache also drops every cached model answer)
    """
    import shutil

    from .engine.buildlock import BuildLock

    _, engine = session.load()
    folder = engine.state_dir
    if not folder.exists():
        click.echo("nothing to clean")
        return
    try:
        with BuildLock(folder):  # a build running now would lose its state under it
            for item in folder.iterdir():
                if item.name in ("cache",) and not cache:
                    continue
                if item.name == "build.lock":
                    continue
                shutil.rmtree(item) if item.is_dir() else item.unlink()
    except BuildLocked as exc:
        fail(str(exc), code=3)
    click.echo(f"cleaned {folder}" + ("" if cache else " (the call cache kept; --cache drops it too)"))


@main.command("search")
@click.argument("query", required=False)
@click.option("--project", help="Search one project only.")
@click.option("-n", "--limit", default=5, show_default=True)
@click.option("--open", "open_best", is_flag=True, help="Print the page behind the best hit.")
@click.option("--misses", is_flag=True, help="List logged queries that found nothing.")
@click.pass_obj
def search_command(session: Session, query: str | None, project: str | None, limit: int, open_best: bool,
                   misses: bool) -> None:
    """BM25 over every index line (the summaries); every lookup is logged.

    Example: kbuild search "how long do refunds take" --open
    """
    from .search import log_lookup, misses as logged_misses, search

    spec, engine = session.load()
    kb = next((v for v in spec.namespace.values() if hasattr(v, "store") and hasattr(v, "projects")), None)
    if misses:
        for record in logged_misses(engine.state_dir):
            click.echo(f"{record['at']}  {record['query']}" + (f"  (project {record['project']})" if record["project"] else ""))
        return
    if not query:
        fail("give a query, or --misses", code=2)
    hits = search(spec.root / (kb.store.root if kb else "kb"), spec.root, query, project, limit)
    log_lookup(engine.state_dir, query, project, hits)
    if not hits:
        click.echo("nothing in the store matches; this is a gap (logged: `kbuild search --misses`)")
        return
    for hit in hits:
        click.echo(f"{hit.score:6.2f}  {hit.page}\n        {hit.line[:200]}")
    if open_best:
        click.echo("\n" + (spec.root / hits[0].page).read_text())


@main.command()
@click.argument("question")
@click.option("--project", help="Draw on one project only.")
@click.option("--budget", default=4000, show_default=True, help="Tokens the context may use (one section may overflow it).")
@click.option("--trace", is_flag=True, help="Print the ranking, token counts and what was left out.")
@click.pass_obj
def context(session: Session, question: str, project: str | None, budget: int, trace: bool) -> None:
    """Compose a context for a coding agent from the store, within a token budget.

    Example: kbuild context "how are refunds limited?" --budget 2000 > context.md
    """
    from .search import compose, log_lookup

    spec, engine = session.load()
    kb = next((v for v in spec.namespace.values() if hasattr(v, "store") and hasattr(v, "projects")), None)
    kept, summarised, lines = compose(spec.root / (kb.store.root if kb else "kb"), spec.root, question, budget, project)
    log_lookup(engine.state_dir, question, project, [h for s in kept + summarised for h in s.hits])
    if not kept:
        click.echo(f"# Context: {question}\n\nNothing in the store speaks to this: a gap. "
                   "Add a source that does (`kbuild add`), rather than guessing.")
    else:
        click.echo(f"# Context: {question}\n")
        for section in kept:
            click.echo(section.text + "\n")
        if summarised:
            click.echo("## Also relevant (summaries)\n")
            for section in summarised:
                for hit in section.hits:
                    click.echo(hit.line)
    if trace:
        click.echo("\n".join(lines), err=True)


@main.command()
@click.argument("path", type=click.Path(path_type=Path))
@click.pass_obj
def show(session: Session, path: Path) -> None:
    """Print a page with its parent and children, to walk the store up and down.

    Example: kbuild show kb/shop/facts/payments/index.md
    """
    from .checks.links import LINK

    spec, _ = session.load()
    page = (path if path.is_absolute() else (session.directory / path)).resolve()
    if not page.is_relative_to(spec.store.resolve()) or not page.is_file():
        # resolved first: a link inside the store may lead anywhere
        fail(f"{path} is not a page of the store; `kbuild show kb/index.md` starts at the top", code=2)
    text = page.read_text(errors="replace")
    click.echo(text.rstrip())
    parent = page.parent / "index.md" if page.name != "index.md" else page.parent.parent / "index.md"
    root = spec.root
    if parent.is_file() and parent.resolve().is_relative_to(root):
        click.echo(f"\nparent: {parent.resolve().relative_to(root).as_posix()}")
    children = []
    for target in LINK.findall(text):
        child = (page.parent / target.split("#")[0]).resolve()
        if child.suffix == ".md" and child.is_file() and child.is_relative_to(page.parent) and child != page:
            children.append(child.relative_to(root).as_posix())
    if children:
        click.echo("children: " + ", ".join(dict.fromkeys(children)))


@main.command()
@click.option("--debounce", default=300, show_default=True,
              help="The longest a burst of edits may run before it is built (ms).")
@click.option("--settle", default=50, show_default=True, help="How long a quiet spell ends a burst (ms).")
@click.pass_obj
def watch(session: Session, debounce: int, settle: int) -> None:
    """Build, then rebuild after every burst of edits to sources, sources.yml, Kbuildfile.py or rules.

    Example: kbuild watch   (edit a source in another window; Ctrl-C stops)
    """
    from .watch import watch as run_watch

    try:
        path = session.file or buildfile.find(session.directory.resolve())
        first = buildfile.load(path)
    except buildfile.BuildfileError as exc:
        fail(str(exc), code=2)
    kb = next((v for v in first.namespace.values() if hasattr(v, "store") and hasattr(v, "projects")), None)
    engines: list[Engine] = []

    def build_once() -> str | None:
        try:
            spec = buildfile.load(path)
            targets = list(spec.targets())
        except Exception as exc:  # a Kbuildfile mid-edit: say so, wait for the next save
            click.secho(f"kbuild: {exc}", fg="red", err=True)
            return None
        engine = Engine(spec.root, spec.rules, max_calls=spec.max_calls, output_folder=spec.output_folder)
        engines[:] = [engine]
        for problem in spec.before_build() if spec.before_build else []:
            click.secho(f"failed: {problem}", fg="red", err=True)
        try:
            report = engine.build(targets)
        except BuildLocked as exc:
            return f"not built: {exc}"
        except (LockError, BuildStopped) as exc:
            return f"not built: {exc}"
        save_report(engine, report)
        for qid, message in sorted(report.root_failures().items(), key=lambda item: item[1]):
            where = "" if isinstance(report.errors.get(qid), Problem) else f"{qid}: "
            click.secho(f"failed: {where}{message}", fg="red", err=True)
        return report.summary()

    def outputs() -> dict[str, str]:
        return {p: h for m in engines[0].memos().values() for p, h in m.outputs.items()} if engines else {}

    run_watch(first.root, kb.store.root if kb else "kb", build_once, outputs, debounce, session.verbose, settle)


@main.command()
@click.option("--format", "fmt", type=click.Choice(["text", "json", "github"]), default="text", show_default=True,
              help="github prints GitHub Actions annotations.")
@click.pass_obj
def check(session: Session, fmt: str) -> None:
    """Fail (exit 1) while any page is stale, edited by hand, dangling, ungrounded, unbuilt or orphaned.

    Needs no model, no network and no .kbuild/: run it in CI on a fresh clone.

    Example: kbuild check --format github
    """
    from .checks.store import as_dicts, check_store

    try:
        spec, engine = session.load()
        kb = next((v for v in spec.namespace.values() if hasattr(v, "store") and hasattr(v, "projects")), None)
        findings = check_store(engine, kb)
    except LockError as exc:
        fail(f"the check could not run: {exc}", code=2)
    except Exception as exc:  # the check itself broke: say so, and do not pass
        if session.debug:
            raise
        fail(f"the check could not run: {type(exc).__name__}: {exc}", code=2)
    if fmt == "json":
        click.echo(json.dumps(as_dicts(findings), indent=2))
    elif fmt == "github":
        for f in findings:
            click.echo(f"::error file={f.page},title=kbuild check::{f.reason}. Fix: {f.fix}")
    else:
        for f in findings:
            click.echo(f"{f.page}: {f.reason}  (fix: {f.fix})")
        click.echo(f"{len(findings)} problems" if findings else "ok: every page is up to date, linked and grounded")
    if findings:
        sys.exit(1)


def _project_sources(session: Session, project: str) -> Path:
    from .store.layout import BadId, check_id

    spec, _ = session.load()
    kb = next((v for v in spec.namespace.values() if hasattr(v, "store") and hasattr(v, "projects")), None)
    if kb is None:
        fail(f"{spec.path} defines no knowledge base (kb = knowledge_base(...)); see `kbuild init`", code=2)
    try:
        check_id("project", project)
    except BadId as exc:
        fail(str(exc), code=2)
    file = spec.root / kb.store.sources_file(project)
    if not file.exists():
        fail(f"{file} does not exist; `kbuild add {project} PATH` starts the project", code=2)
    return file


def _add_request(file: Path, make: Any) -> None:
    from pydantic import ValidationError

    from .store.sources import SourcesError
    from .store.sources import add as add_entry

    try:
        add_entry(file, make())
    except SourcesError as exc:
        fail(str(exc), code=2)
    except ValidationError as exc:
        fail(exc.errors()[0]["msg"].removeprefix("Value error, "), code=2)


@main.group()
def view() -> None:
    """Views written on request (one feature, use case or question)."""


@view.command("add")
@click.argument("project")
@click.argument("name")
@click.option("--about", required=True, help="What the view is about: a feature, a use case or a question.")
@click.option("--across", multiple=True, help="Another project whose facts the view may draw on (repeatable).")
@click.pass_obj
def view_add(session: Session, project: str, name: str, about: str, across: tuple[str, ...]) -> None:
    """Ask for a view NAME of PROJECT; the next build writes artifacts/views/NAME.md.

    Example: kbuild view add payments refunds --about "how refunds work and their limits"
    """
    from .store.sources import ViewRequest

    file = _project_sources(session, project)
    _add_request(file, lambda: ViewRequest(name=name, about=about, across=list(across)))
    click.echo(f"added view {name} to {file.name} of {project}; run `kbuild` to write it")


@main.group()
def spec() -> None:
    """Specs: what a coding agent implements, written from a view."""


@spec.command("add")
@click.argument("project")
@click.argument("feature")
@click.option("--view", "view_name", required=True, help="The view the spec is written from.")
@click.pass_obj
def spec_add(session: Session, project: str, feature: str, view_name: str) -> None:
    """Ask for a spec FEATURE of PROJECT from a view; the next build writes artifacts/specs/FEATURE.md.

    Example: kbuild spec add payments refund-api --view refunds
    """
    from .store.sources import SpecRequest

    file = _project_sources(session, project)
    _add_request(file, lambda: SpecRequest(name=feature, view=view_name))
    click.echo(f"added spec {feature} (from view {view_name}) to {file.name} of {project}; run `kbuild` to write it")


@main.command()
@click.option("-n", "--limit", default=20, show_default=True, help="How many calls, newest last.")
@click.option("--query", "query", help="Only calls made for queries whose id contains this.")
@click.option("--errors", is_flag=True, help="Only replies that failed (did not fit their schema).")
@click.option("--full", is_flag=True, help="Show each prompt and response in full.")
@click.option("--json", "as_json", is_flag=True, help="Print JSON lines.")
@click.pass_obj
def logs(session: Session, limit: int, query: str | None, errors: bool, full: bool, as_json: bool) -> None:
    """Every model call: prompt, response, tokens, latency, cost, and whether the cache answered.

    Example: kbuild logs -n 5 --full
    """
    from .model.calllog import CallLog

    spec, engine = session.load()
    if not (engine.state_dir / "logs.db").exists():
        click.echo("no model calls logged yet (the offline backend makes none)")
        return
    rows = CallLog.for_root(engine.state_dir).rows(limit, query, errors)
    for row in rows:
        if as_json:
            click.echo(json.dumps(row, sort_keys=True))
            continue
        hit = "cache" if row["cache_hit"] else f"{row['latency_ms']:.0f} ms"
        cost = "$?" if row["cost"] is None and not row["cache_hit"] else f"${row['cost'] or 0:.4f}"
        line = (f"{row['at']}  {row['task']:<14} {row['model']:<20} {hit:>9}  "
                f"{row['tokens_in']:>6} in {row['tokens_out']:>5} out  {cost:>8}  {row['query']}")
        click.echo(line + (f"  ERROR: {row['error']}" if row["error"] else ""))
        if full:
            sent = json.loads(row["request"])
            for message in sent.get("messages", []):
                click.echo(f"  [{message['role']}]\n" + "\n".join("    " + l for l in str(message["content"]).splitlines()))
            settings = {k: v for k, v in sent.items() if k not in ("messages", "response_format")}
            click.echo(f"  [parameters] {json.dumps(settings, sort_keys=True)}")
            if "response_format" in sent:
                click.echo(f"  [response_format] {json.dumps(sent['response_format'], sort_keys=True)}")
            click.echo("  [response]\n" + "\n".join("    " + l for l in str(row["response"]).splitlines()))


@main.command()
@click.option("--json", "as_json", is_flag=True, help="Print JSON.")
@click.pass_obj
def status(session: Session, as_json: bool) -> None:
    """What is stale, grouped by what changed, and what a build would run.

    Example: kbuild status --json
    """
    spec, engine = session.load()
    targets = session.targets(spec)
    inspection = engine.inspect()
    stale, memos = inspection.stale, inspection.memos
    groups: dict[str, list[str]] = {}  # what changed -> the queries stale because of it
    for qid, (_, cause) in stale.items():
        reason = stale[cause][0]
        by_rule = reason.kind in (Change.RULE_CHANGED, Change.RULE_GONE)  # one group for all a rule's queries
        groups.setdefault(reason.sentence if by_rule else f"{cause}: {reason.sentence}", []).append(qid)
    # Never built: a target, or a query a recorded one read (it failed then). From the same reading
    # of the graph as the stale set, rather than a dry run that would load it again.
    read = {dep for memo in memos.values() for group in memo.deps for dep, _ in group if not isinstance(dep, FileRead)}
    new = sorted(q for q in {t.id for t in targets} | read if q not in memos)
    if as_json:
        click.echo(json.dumps({"causes": {c: sorted(qs) for c, qs in groups.items()}, "new": new},
                              indent=2, sort_keys=True))
        return
    if not stale and not new:
        click.echo("up to date: nothing would run")
        return
    for cause in sorted(groups):
        pages = sorted(p for q in groups[cause] for p in memos[q].outputs if p.endswith(".md"))
        click.echo(cause)
        click.echo(f"  {len(groups[cause])} queries stale, {len(pages)} pages" + (": " if pages else "")
                   + ", ".join(pages[:6]) + (" ..." if len(pages) > 6 else ""))
    for qid in new:
        click.echo(f"{qid}: not built yet")
    click.echo(f"a build checks these {len(stale) + len(new)} queries and runs those whose reads come out changed")
    click.echo(estimate(engine, [memos[q].rule for q in stale]))


@main.command()
@click.argument("what")
@click.pass_obj
def explain(session: Session, what: str) -> None:
    """Why a query or a generated file would rebuild, what it read and what reads it.

    WHAT is a query id as `kbuild graph` prints it, or the path of a file a query wrote.

    Example: kbuild explain kb/shop/facts/payments/refunds.md
    """
    spec, engine = session.load()
    targets = session.targets(spec)
    memos = engine.memos()
    qid = what if what in memos else next((q for q, m in memos.items() if what in m.outputs), None)
    if qid is None:
        fail(f"{what} is neither a recorded query nor a file one wrote; `kbuild graph` lists them", code=2)
    plan = engine.plan(targets)
    memo = memos[qid]
    click.echo(f"{qid}  (rule {memo.rule})")
    click.echo(f"  {'would run: ' + plan[qid].sentence if qid in plan else 'up to date'}")
    for path in sorted(memo.outputs):
        click.echo(f"  writes {path}")
    for group in memo.deps:
        for dep, _ in group:
            mark = "*" if plan.get(dep) else " "
            click.echo(f"  {mark} reads {dep}")
    graph = to_graph(memos, files=False)
    readers = sorted(graph.predecessors(qid)) if qid in graph else []
    for reader in readers:
        click.echo(f"    read by {reader}")
    for path in sorted((engine.state_dir / "reports").glob("*.json"), reverse=True):
        past = json.loads(path.read_text())
        if qid in past["reasons"]:
            click.echo(f"  last ran in the build of {path.stem[:15]}: {past['reasons'][qid]}")
            decision = past.get("decisions", {}).get(qid)
            if decision:
                verdict = "same: the old text was kept" if decision["same"] else "different"
                click.echo(f"  cutoff: {verdict} (stage {decision['stage']}, p={decision['probability']}: "
                           f"{decision['reason']})")
            elif qid in past.get("cutoff", {}):
                click.echo("  cutoff: its new value was byte for byte the old one")
            break


@main.command()
@click.option("--format", "fmt", type=click.Choice(["dot", "mermaid", "json"]), default="dot", show_default=True)
@click.option("--no-files", is_flag=True, help="Leave input files out; show queries only.")
@click.argument("page", required=False)
@click.pass_obj
def graph(session: Session, fmt: str, no_files: bool, page: str | None) -> None:
    """Print the recorded dependency graph (edges point from a query to what it read), whole or
    around one PAGE (a generated file or a query id): what it is built on and what is built on it.

    Example: kbuild graph --format mermaid kb/shop/artifacts/views/digest.md
    """
    import networkx as nx

    _, engine = session.load()
    memos = engine.memos()
    g = to_graph(memos, files=not no_files)
    if page is not None:
        qid = page if page in memos else next((q for q, m in memos.items() if page in m.outputs), None)
        if qid is None:
            fail(f"{page} is neither a recorded query nor a file one wrote", code=2)
        g = g.subgraph({qid} | nx.descendants(g, qid) | nx.ancestors(g, qid)).copy()
    nodes = sorted(g.nodes)
    ids = {n: f"n{i}" for i, n in enumerate(nodes)}
    edges = sorted(g.edges)
    if fmt == "json":
        click.echo(json.dumps({"nodes": [{"id": n, **g.nodes[n]} for n in nodes],
                               "edges": [list(e) for e in edges]}, indent=1, sort_keys=True))
    elif fmt == "mermaid":
        click.echo("graph LR")
        for n in nodes:
            label = n.replace('"', "#quot;")
            click.echo(f'  {ids[n]}["{label}"]')
        for a, b in edges:
            click.echo(f"  {ids[a]} --> {ids[b]}")
    else:
        click.echo("digraph kbuild {\n  rankdir=LR;")
        for n in nodes:
            shape = "note" if g.nodes[n].get("kind") == "file" else "box"
            click.echo(f"  {json.dumps(n)} [shape={shape}];")
        for a, b in edges:
            click.echo(f"  {json.dumps(a)} -> {json.dumps(b)};")
        click.echo("}")


class Progress:
    """A progress bar on a terminal (tqdm): queries done of those that may run, failures, the
    query at work, elapsed and estimated time. Quiet when stderr is not a terminal."""

    def __init__(self, enabled: bool, total: int | None = None) -> None:
        self.bar = None
        self.failed = 0
        if enabled:
            from tqdm import tqdm

            self.bar = tqdm(total=total or None, unit="query", leave=False, dynamic_ncols=True, file=sys.stderr)

    def __call__(self, event: str, qid: str) -> None:
        if self.bar is None:
            return
        if event in ("done", "fail"):
            self.failed += event == "fail"
            if self.bar.total is not None and self.bar.n >= self.bar.total:
                self.bar.total += 1  # the estimate was low: a new query (a new fact) appeared
            self.bar.update(1)
            self.bar.set_postfix_str(f"{self.failed} failed, {qid[:50]}", refresh=False)

    def close(self) -> None:
        if self.bar is not None:
            self.bar.close()


def estimate(engine: Engine, rules: list[str]) -> str:
    """At most how many model calls and tokens rebuilding these queries costs: every query of a
    rule that asks the model, at the average size of the calls logged so far."""
    calls = sum(1 for name in rules if (rule := engine.rules.get(name)) is not None and "task" in rule.params)
    if not calls:
        return "model calls: none expected"
    per_call = None
    log = engine.state_dir / "logs.db"
    if log.exists():
        import sqlite3

        row = sqlite3.connect(str(log)).execute(
            "SELECT AVG(tokens_in), AVG(tokens_out) FROM calls WHERE cache_hit = 0 AND error IS NULL").fetchone()
        per_call = row if row and row[0] is not None else None
    size = (f", about {int(per_call[0] * calls):,} tokens in and {int(per_call[1] * calls):,} out at the average "
            "of the calls logged so far" if per_call else "")
    return f"model calls: at most {calls} (fewer where the call cache has the answer or a cutoff stops the climb){size}"


def print_plan(engine: Engine, targets: list[Query], as_json: bool) -> None:
    plan = engine.plan(targets)
    if as_json:
        click.echo(json.dumps({qid: reason.sentence for qid, reason in plan.items()}, indent=2, sort_keys=True))
        return
    if not plan:
        click.echo("up to date: nothing would run")
        return
    for qid in sorted(plan):
        click.echo(f"{qid}: {plan[qid].sentence}")
    click.echo(f"{len(plan)} queries would be checked or run (fewer run where a rebuilt value is unchanged)")
    stale = engine.inspect()
    click.echo(estimate(engine, [stale.memos[q].rule for q in stale.stale]))


BEGIN, END = "<!-- kbuild:begin (generated by kbuild; edits here are replaced) -->", "<!-- kbuild:end -->"


def update_harness(file: Path, root: Path, rel: str) -> None:
    """Keep the root index in a marked block of a coding harness's instruction file (AGENTS.md,
    CLAUDE.md, named by `harness_file` in Kbuildfile.py), so an agent starts from it; the rest of
    the file is the person's."""
    from .engine.files import atomic_write

    index = root / rel
    if not index.exists():
        return
    body = index.read_text().replace("](", f"]({Path(rel).parent.as_posix()}/")
    block = f"{BEGIN}\n## Knowledge base ([{rel}]({rel}))\n\n{body.split(chr(10), 2)[-1].strip()}\n{END}"
    text = file.read_text() if file.exists() else ""
    if BEGIN in text and END in text:
        head, rest = text.split(BEGIN, 1)
        new = head + block + rest.split(END, 1)[1]
    else:
        new = text + ("" if not text else "\n" if text.endswith("\n") else "\n\n") + block + "\n"
    if new != text:
        atomic_write(file, new.encode())


def save_report(engine: Engine, report: Report) -> None:
    """Every build leaves its report in .kbuild/reports/ (the newest 50 are kept) for `explain`."""
    from .engine.files import atomic_write

    folder = engine.state_dir / "reports"
    now = time.time_ns()  # one reading of the clock: two could straddle a second and sort out of order
    stamp = time.strftime("%Y%m%dT%H%M%S", time.gmtime(now // 10**9)) + f"-{now % 10**9:09d}"
    atomic_write(folder / f"{stamp}.json", json.dumps(report_json(report), indent=1, sort_keys=True).encode())
    for old in sorted(folder.glob("*.json"))[:-50]:
        old.unlink()


def report_json(report: Report) -> dict[str, Any]:
    return {
        "executed": report.executed,
        "reused": report.reused,
        "cutoff": report.cutoff,
        "failed": report.failed,
        "reasons": report.reasons,
        "removed": report.removed,
        "calls": report.calls,
        "cache_hits": report.cache_hits,
        "counters": report.counters,
        "decisions": report.decisions,
        "warnings": report.warnings,
        "seconds": round(report.seconds, 3),
    }


def print_report(report: Report, debug: bool, quiet: bool = False, verbose: bool = False) -> None:
    if verbose:
        for qid in report.executed:
            cut = f" (cut off: {report.cutoff[qid]})" if qid in report.cutoff else ""
            click.echo(f"ran {qid}: {report.reasons.get(qid, '')}{cut}")
    for qid, messages in sorted(report.warnings.items()) if not quiet else ():
        for message in messages:
            click.secho(f"warning: {message}", fg="yellow", err=True)
    causes = report.root_failures()
    for qid, message in sorted(causes.items(), key=lambda item: item[1]):
        # a Problem names its source itself; the query id would only repeat it
        where = "" if isinstance(report.errors.get(qid), Problem) else f"{qid}: "
        click.secho(f"failed: {where}{message}", fg="red", err=True)
        exc = report.errors.get(qid)
        if debug and exc is not None:
            click.echo(getattr(exc, "__kbuild_traceback__", ""), err=True)
    if len(report.failed) > len(causes):
        click.secho(f"({len(report.failed) - len(causes)} more could not be built because of these)", fg="red", err=True)
    if not quiet:
        click.echo(report.summary())
