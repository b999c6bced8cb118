"""`kbuild watch`: rebuild while the user edits."""
from __future__ import annotations

import click

from ..buildfile import Buildfile
from ..engine import BuildLocked, BuildStopped, Engine, LockError
from ..store.localstate import LocalState
from ..store.reports import save_report
from .build import print_failures, protect_hand_edits
from .session import KbuildError, Session, pass_session


@click.command()
@click.option("--debounce", default=300, show_default=True,
              help="The longest a burst of edits may run before it is built (ms).")
@click.option("--settle", default=50, show_default=True, help="How long a quiet spell ends a burst (ms).")
@click.option("--force", is_flag=True,
              help="Overwrite pages edited by hand (their text is kept in .kbuild/overwritten/).")
@pass_session
def watch(session: Session, debounce: int, settle: int, force: bool = False) -> None:
    """Build, then rebuild after every burst of edits to sources, sources.yml, Kbuildfile.py or rules.

    Example: kbuild watch   (edit a source in another window; Ctrl-C stops)
    """
    from ..services.watch import watch as run_watch

    first, _ = session.load()  # a Kbuildfile that does not load at the start is an error, as for a build
    last: list[tuple[Buildfile, Engine]] = []  # the Kbuildfile as the newest build loaded it

    def build_once() -> str | None:
        try:
            spec, engine = session.load()
            targets = session.targets(spec)
        except Exception as exc:  # a Kbuildfile mid-edit: say so, wait for the next save
            click.secho(f"kbuild: {exc}", fg="red", err=True)
            return None
        last[:] = [(spec, engine)]
        for problem in spec.before_build() if spec.before_build else []:
            click.secho(f"failed: {problem}", fg="red", err=True)
        try:
            edits = protect_hand_edits(engine, targets, force, "kbuild watch")
        except KbuildError as exc:  # edited pages are kept: the builds wait until they are restored or removed
            return f"not built: {exc.format_message()}"
        try:
            report = engine.build(targets, stat_pass=edits.stat_pass)
        except (BuildLocked, LockError, BuildStopped) as exc:
            return f"not built: {exc}"
        save_report(LocalState(engine.state_dir), report)
        print_failures(report)
        return report.summary()

    def outputs() -> dict[str, str]:
        return {p: h for m in last[0][1].memos().values() for p, h in m.outputs.items()} if last else {}

    def reads() -> set[str] | None:
        """Every file the last build read: what a change to is worth a build."""
        from ..engine import FileRead

        if not last:
            return None
        return {d.path for m in last[0][1].memos().values() for g in m.deps for d, _ in g if isinstance(d, FileRead)}

    def wait_for_other_build() -> bool:
        from ..engine.buildlock import wait_until_free
        from ..engine.layout import FOLDER

        return wait_until_free(first.root / FOLDER)

    def inputs_in_output_folder() -> set[str]:
        return last[0][0].inputs_in_output_folder() if last else set()

    output_folder = first.root / first.output_folder if first.output_folder else None
    run_watch(first.root, output_folder, build_once, outputs, inputs_in_output_folder, reads, wait_for_other_build,
              debounce, session.verbose, settle, force)
