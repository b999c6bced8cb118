"""`kbuild init`: a new knowledge base's Kbuildfile.py, kb/ folder, .gitignore lines and .mcp.json."""
from __future__ import annotations

import json
from pathlib import Path

from .buildfile import FILENAME
from .engine.files import TEMP_SUFFIX
from .engine.layout import FOLDER

KBUILDFILE = '''"""The build file of this knowledge base: `kbuild` runs it.

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
    kbuildfile.write_text(KBUILDFILE)
    (directory / "kb").mkdir(exist_ok=True)
    gitignore = directory / ".gitignore"
    present = gitignore.read_text().splitlines() if gitignore.exists() else []
    missing = [line for line in GITIGNORE_LINES if line not in present]
    if missing:
        prefix = "" if not present or gitignore.read_text().endswith("\n") else "\n"
        with gitignore.open("a") as out:
            out.write(prefix + "# kbuild's local state: rebuildable, never committed\n" + "\n".join(missing) + "\n")
    return kbuildfile
