"""`kbuild init`: a new knowledge base's Kbuildfile.py, kb/ folder, .gitignore lines and .mcp.json."""
from __future__ import annotations

import json
import shlex
import subprocess
import sys
from pathlib import Path

from ..buildfile import FILENAME
from ..engine.files import TEMP_SUFFIX
from ..engine.layout import FOLDER
from ..retrieval.embedding import INSTALL_MODEL, local_model_installed

KBUILDFILE = '''"""The build file of this knowledge base: `kbuild` runs it.

Sources are listed per project in kb/<project>/sources.yml (`kbuild add PROJECT PATH_OR_URL`).
Everything else under kb/ is generated; commit it together with kbuild.lock, so that a fresh
clone (and `kbuild check` in CI) can tell what is stale without a model.
"""
from pathlib import Path

from kbuild.rules import knowledge_base

# The default pipeline: sources -> text -> facts -> summaries -> indexes. With no model
# configured it runs the offline backend (extractive, no network, no key). With a model, name
# it here (model={"model": "gpt-4o-mini"}) or in KBUILD_MODEL, and keep the key in OPENAI_API_KEY:
# `kbuild check` in CI needs the name, to know which model wrote the pages, never the key.
{semantic_comment}
kb = knowledge_base(Path(__file__).parent, store="kb", {semantic}floor_tokens=2000, cap_tokens=4000)

RULES = kb.rules  # every rule the engine should know; add your own rules to this list
targets = kb.targets  # what `kbuild` brings up to date
before_build = kb.before_build  # downloads url sources before each build
max_calls = 4  # model calls in flight at once
# harness_file = "AGENTS.md"  # keep the root index in a marked block of your agent's instruction file
# split_lock = True  # a lock file per project in kbuild.lock.d/, once kbuild.lock nears 50 MB
'''

# Ranking by meaning as well as by words finds what a reader asks in other words than the
# source's (docs/retrieval.md: 0.97 against 0.88 by words alone at 2,500 tokens, on the last set
# of questions written blind): on in a new Kbuildfile wherever its model is installed.
SEMANTIC_ON = """# floor_tokens/cap_tokens bound the size of one fact. semantic= ranks search by meaning as well
# as by words: "local" runs a sentence model on this machine, {"source": "openai"} asks an
# /embeddings endpoint instead; without it, search ranks by words alone."""
SEMANTIC_OFF = f"""# floor_tokens/cap_tokens bound the size of one fact. Add semantic={{"source": "local"}} to rank
# search by meaning as well as by words (a sentence model on this machine:
# {INSTALL_MODEL}), or {{"source": "openai"}}."""


def kbuildfile_text(semantic: bool) -> str:
    return KBUILDFILE.replace("{semantic_comment}", SEMANTIC_ON if semantic else SEMANTIC_OFF).replace(
        "{semantic}", 'semantic={"source": "local"},\n                    ' if semantic else "")


# What an MCP client (Claude Code reads .mcp.json at the repository root; Cursor the same
# "mcpServers" in .cursor/mcp.json) runs to reach the store: `kbuild mcp`, started in the
# repository, finds the Kbuildfile from there.
MCP_CONFIG = {"mcpServers": {"kbuild": {"command": "kbuild", "args": ["mcp"]}}}
MCP_FILE = ".mcp.json"


def mcp_snippet() -> str:
    return json.dumps(MCP_CONFIG, indent=2) + "\n"


def write_mcp_config(directory: Path) -> bool:
    """Write .mcp.json into `directory` unless it has one (a person's, to merge by hand): whether it wrote."""
    path = directory / MCP_FILE
    if path.exists():
        return False
    path.write_text(mcp_snippet())
    return True


GITIGNORE_LINES = [f"{FOLDER}/", f"*{TEMP_SUFFIX}"]


def start(directory: Path) -> Path:
    """Write the files into `directory` (made if missing) and return the Kbuildfile's path;
    FileExistsError when it has one already. .gitignore gains only the lines it lacks."""
    directory.mkdir(parents=True, exist_ok=True)
    kbuildfile = directory / FILENAME
    if kbuildfile.exists():
        raise FileExistsError(kbuildfile)
    kbuildfile.write_text(kbuildfile_text(local_model_installed()))
    (directory / "kb").mkdir(exist_ok=True)
    add_lines(directory / ".gitignore", GITIGNORE_LINES, "# kbuild's local state: rebuildable, never committed")
    write_gitattributes(directory)
    return kbuildfile


# Generated files are collapsed in pull requests' diffs (linguist-generated); the lock merges
# through `kbuild merge-lock`, and a generated page both branches changed keeps our side (the
# next `kbuild` writes it again, since the merged lock marks its query to run). sources.yml is
# a person's, shown in diffs, and merged entry by entry (`kbuild merge-sources`): two branches
# that each add a source both append to it.
GITATTRIBUTES_LINES = [
    "kb/** linguist-generated merge=kbuild-generated",
    "kb/*/sources.yml -linguist-generated merge=kbuild-sources",
    "kbuild.lock linguist-generated merge=kbuild-lock",
    "kbuild.lock.d/*.lock linguist-generated merge=kbuild-lock",
]
DRIVER_NAMES = {
    "kbuild-lock": "kbuild.lock: the union of what each branch rebuilt",
    "kbuild-sources": "sources.yml: entry by entry, both sides' sources and comments kept",
    "kbuild-generated": "a page kbuild generates: our side, the next kbuild writes it again",
}


def kbuild_command() -> str:
    """How git is to run this kbuild: the interpreter running it now, by its absolute path, so
    that a git client started without the virtual environment on its PATH (an editor's, a GUI's)
    still finds it."""
    return f"{shlex.quote(sys.executable)} -m kbuild"


def merge_drivers() -> dict[str, str]:
    """The git config keys of kbuild's merge drivers and their values, for this kbuild."""
    run = kbuild_command()
    drivers = {"kbuild-lock": f"{run} merge-lock %O %A %B", "kbuild-sources": f"{run} merge-sources %O %A %B %P",
               "kbuild-generated": "true"}
    config: dict[str, str] = {}
    for name, driver in drivers.items():
        config[f"merge.{name}.name"] = DRIVER_NAMES[name]
        config[f"merge.{name}.driver"] = driver
    return config


def write_gitattributes(directory: Path) -> None:
    """Add to .gitattributes the lines it lacks."""
    add_lines(directory / ".gitattributes", GITATTRIBUTES_LINES,
              "# kbuild: generated files, and how git merges them (kbuild merge-lock)")


def add_lines(path: Path, lines: list[str], comment: str) -> None:
    """Append to `path` (made if missing) the `lines` it lacks, under `comment`."""
    present = path.read_text().splitlines() if path.exists() else []
    missing = [line for line in lines if line not in present]
    if missing:
        prefix = "" if not present or path.read_text().endswith("\n") else "\n"
        with path.open("a") as out:
            out.write(prefix + comment + "\n" + "\n".join(missing) + "\n")


def git_config_command() -> str:
    """The shell command that registers the merge drivers in a clone (git does not clone its config)."""
    return " && ".join(f"git config {key} {shlex.quote(value)}" for key, value in merge_drivers().items()
                       if key.endswith(".driver"))


def setup_git(directory: Path) -> str | None:
    """Register the merge drivers in the git repository `directory` is in: None when done, or
    why not (not a git repository, git missing or failing)."""
    try:
        inside = subprocess.run(["git", "-C", str(directory), "rev-parse", "--is-inside-work-tree"],
                                capture_output=True, text=True)
        if inside.returncode != 0 or inside.stdout.strip() != "true":
            return "not a git repository"
        for key, value in merge_drivers().items():
            done = subprocess.run(["git", "-C", str(directory), "config", key, value], capture_output=True, text=True)
            if done.returncode != 0:
                return f"git config {key} failed: {done.stderr.strip() or done.returncode}"
    except OSError as exc:
        return f"git could not run: {exc.strerror or exc}"
    return None
