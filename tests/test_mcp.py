"""`kbuild mcp` end to end: the SDK's own client starts the server over stdio as the .mcp.json
that `kbuild init` wrote says, lists and calls every tool, reads resources, and the store is
byte for byte the same afterwards (read-only, no build). Timeouts guard against a hang only."""
from __future__ import annotations

import hashlib
import json
import os
import shutil
import sys
from pathlib import Path
from typing import Any

import anyio
import pytest
from conftest import kbuild
from documents import PAYMENTS, small_store
from mcp.client.session import ClientSession
from mcp.client.stdio import StdioServerParameters, stdio_client
from mcp.shared.exceptions import MCPError

REFUNDS = "kb/shop/facts/payments/refunds.md"
HOURS = "# Hours\n\nThe shop opens at nine. It closes at six on weekdays.\n"
HANG = 240  # seconds: only a server that hangs is this slow


@pytest.fixture
def store(tmp_path: Path) -> Path:
    small_store(tmp_path, {"payments.md": PAYMENTS, "hours.md": HOURS})
    assert kbuild(tmp_path).exit_code == 0
    return tmp_path


def server_parameters(root: Path) -> StdioServerParameters:
    """The server .mcp.json names, with `kbuild` from this interpreter's environment."""
    entry = json.loads((root / ".mcp.json").read_text())["mcpServers"]["kbuild"]
    here = str(Path(sys.executable).parent)
    command = shutil.which(entry["command"], path=here)
    if command is None:  # no console script beside the interpreter: the same program by module
        command, entry["args"] = sys.executable, ["-m", "kbuild", *entry["args"]]
    env = {"PATH": here + os.pathsep + os.environ.get("PATH", ""), "PYTHONPATH": os.environ.get("PYTHONPATH", "")}
    return StdioServerParameters(command=command, args=entry["args"], cwd=str(root), env=env)


def snapshot(root: Path) -> dict[str, str]:
    return {p.relative_to(root).as_posix(): hashlib.sha256(p.read_bytes()).hexdigest()
            for p in sorted(root.rglob("*")) if p.is_file()}


def structured(result: Any) -> dict[str, Any]:
    assert not result.is_error, result.content
    answer = result.structured_content
    assert json.loads(result.content[0].text) == answer  # the text says the same, for clients without structure
    return answer


def error_text(result: Any) -> str:
    assert result.is_error
    return result.content[0].text


async def session_run(root: Path, script: Any) -> None:
    with anyio.fail_after(HANG):
        async with stdio_client(server_parameters(root), errlog=sys.stderr) as (read, write):
            async with ClientSession(read, write, read_timeout_seconds=HANG) as session:
                await session.initialize()
                await script(session)


@pytest.mark.timeout(HANG + 60)
def test_every_tool_and_resource_over_stdio_and_nothing_written(store):
    before = snapshot(store)
    seen: dict[str, Any] = {}

    async def script(session: ClientSession) -> None:
        tools = {tool.name: tool for tool in (await session.list_tools()).tools}
        assert sorted(tools) == ["context", "explain", "search", "show", "status"]
        assert all(tool.annotations.read_only_hint for tool in tools.values())
        assert {"question", "budget", "project"} <= set(tools["context"].input_schema["properties"])

        found = structured(await session.call_tool("search", {"query": "how long may a customer wait before "
                                                                         "requesting refunds?", "limit": 3}))
        assert found["schema"] == "kbuild.search/2" and found["hits"][0]["page"] == REFUNDS
        assert len(found["hits"]) == 3 and "90 days" in found["hits"][0]["line"]
        assert "no project 'nowhere'" in error_text(await session.call_tool("search", {"query": "x", "project": "nowhere"}))

        question = {"question": "refund requests and payments", "budget": 100, "project": "shop"}
        context = structured(await session.call_tool("context", question))
        assert context["schema"] == "kbuild.context/2" and context["project"] == "shop"
        assert context["sections"][0]["pages"] == [REFUNDS]
        assert "Refunds SHALL be requested within 90 days" in context["text"]
        assert context["text"].startswith("# Context: refund requests and payments")
        assert structured(await session.call_tool("context", question)) == context  # deterministic
        seen["context"] = context

        page = structured(await session.call_tool("show", {"page": REFUNDS}))
        assert page["page"] == REFUNDS and page["parent"] == "kb/shop/facts/payments/index.md"
        assert page["text"] == (store / REFUNDS).read_text()
        top = structured(await session.call_tool("show", {"page": "kb/index.md"}))
        assert top["children"] == ["kb/shop/index.md"] and top["parent"] is None
        assert "not a page of the store" in error_text(await session.call_tool("show", {"page": "../../etc/passwd"}))

        status = structured(await session.call_tool("status", {}))
        assert status == {"schema": "kbuild.status/1", "up_to_date": True, "groups": [], "new": [], "stale": [],
                          "estimate": "model calls: none expected"}

        explained = structured(await session.call_tool("explain", {"what": REFUNDS}))
        assert explained["query"] == 'fact("shop","payments","refunds")' and explained["writes"] == [REFUNDS]
        assert explained["up_to_date"] is True
        assert "neither a recorded query" in error_text(await session.call_tool("explain", {"what": "nothing"}))

        listed = [str(r.uri) for r in (await session.list_resources()).resources]
        assert listed[0] == "kbuild://kb/index.md" and f"kbuild://{REFUNDS}" in listed
        pages = sorted(p.relative_to(store).as_posix() for p in (store / "kb").rglob("*.md") if "/raw/" not in p.as_posix())
        assert sorted(uri.removeprefix("kbuild://") for uri in listed) == pages
        read = await session.read_resource(f"kbuild://{REFUNDS}")
        assert read.contents[0].text == (store / REFUNDS).read_text()
        with pytest.raises(MCPError, match="not a page of the store"):
            await session.read_resource("kbuild://kb/nowhere.md")

    anyio.run(session_run, store, script)
    assert snapshot(store) == before  # read-only: no page, lock, state or lookup log written
    cli = kbuild(store, "context", "refund requests and payments", "--budget", "100", "--project", "shop", "--json")
    assert json.loads(cli.stdout) == seen["context"]  # one implementation: the command answers the same


@pytest.mark.timeout(HANG + 60)
def test_status_sees_an_edit_and_the_server_never_builds(store):
    (store / "hours.md").write_text(HOURS.replace("nine", "ten"))
    before = snapshot(store)

    async def script(session: ClientSession) -> None:
        status = structured(await session.call_tool("status", {}))
        assert status["up_to_date"] is False and any("hours.md" in g["cause"] for g in status["groups"])
        explained = structured(await session.call_tool("explain", {"what": "kb/shop/facts/hours/hours.md"}))
        assert explained["up_to_date"] is False and explained["would_run"]["sentence"]

    anyio.run(session_run, store, script)
    assert snapshot(store) == before


def test_without_a_kbuildfile_it_fails_in_one_line(tmp_path):
    result = kbuild(tmp_path, "mcp")
    assert result.exit_code == 2 and "kbuild init" in result.output and "Traceback" not in result.output


def test_the_readme_shows_the_configuration_kbuild_init_writes(tmp_path):
    from kbuild.services import scaffold

    readme = (Path(__file__).parent.parent / "README.md").read_text()
    section = readme.split("## Agents: MCP and JSON", 1)[1]
    snippet = section.split("```json\n", 1)[1].split("```", 1)[0]
    assert json.loads(snippet) == scaffold.MCP_CONFIG
    assert kbuild(tmp_path, "init", str(tmp_path)).exit_code == 0
    assert json.loads((tmp_path / ".mcp.json").read_text()) == scaffold.MCP_CONFIG
    again = kbuild(tmp_path / "other", "init", str(tmp_path / "other"))
    (tmp_path / "other" / "Kbuildfile.py").unlink()
    kept = (tmp_path / "other" / ".mcp.json").read_text()
    printed = kbuild(tmp_path / "other", "init", str(tmp_path / "other"))  # a .mcp.json of one's own is kept
    assert again.exit_code == printed.exit_code == 0 and (tmp_path / "other" / ".mcp.json").read_text() == kept
    assert '"kbuild"' in printed.output and "exists" in printed.output
