"""What the MCP tools, the commands' project arguments, the pages and the error lines refuse
(issue 50): a project that is not one of the store's, a raw original's secrets, a source's
instruction to a model or its markup as a summary or a view's statement, a Google API key, a
url's password. Each is run as a user or an MCP client meets it."""
from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import anyio
import pytest
from conftest import kbuild
from documents import PAYMENTS, small_store

from kbuild.cli.session import Session
from kbuild.mcp_server import Store, server

SALARY = ("- [salary](salary.md): the salary of every employee, by name\n"
          "- [holidays](holidays.md): the days off of every employee\n- [office](office.md): where the desks are\n")
# Where a project argument may try to lead: above the store, to a planted index, and to /.
ESCAPES = ["../../outside", "../..", "..", "../../../../..", "/", "shop/../../outside", "shop/facts"]


@pytest.fixture
def store(tmp_path: Path) -> Path:
    """A built store at tmp_path/proj, with an index.md planted outside it at tmp_path/outside."""
    root = tmp_path / "proj"
    root.mkdir()
    small_store(root, {"payments.md": PAYMENTS})
    assert kbuild(root).exit_code == 0
    (tmp_path / "outside").mkdir()
    (tmp_path / "outside/index.md").write_text(SALARY)
    return root


def call(root: Path, tool: str, arguments: dict[str, Any]) -> Any:
    """An MCP tool called through the server's own tool functions, as a client's call reaches them."""
    app = server(Store(Session(root, None, False)))
    return anyio.run(app.call_tool, tool, arguments)


def refusal(root: Path, tool: str, arguments: dict[str, Any]) -> str:
    from mcp.server.mcpserver.exceptions import ToolError

    with pytest.raises(ToolError) as refused:
        call(root, tool, arguments)
    return str(refused.value)


# 4. a project is a name from the store, nothing else

@pytest.mark.parametrize("project", [*ESCAPES, "ABSOLUTE"])
def test_a_command_given_a_project_outside_the_store_names_the_projects_and_reads_nothing(store, project):
    project = str(store.parent / "outside") if project == "ABSOLUTE" else project
    said = f"no project {project!r} in the store; the projects are: shop"
    for args in (["search", "salary"], ["context", "salary employee"]):
        result = kbuild(store, *args, "--project", project)
        assert result.exit_code == 2, (args, project, result.output)
        assert result.output == f"kbuild: {said}\n", result.output  # one line: no hit, no traceback
    result = kbuild(store, "search", "salary", "--project", project, "--json")
    assert result.exit_code == 2 and json.loads(result.output)["error"] == said, result.output
    assert kbuild(store, "search", "refund", "--project", "shop").exit_code == 0


def test_eval_given_a_project_outside_the_store_is_one_line(store):
    (store / "q.json").write_text(json.dumps([{"q": "salary?", "answer": "salary"}]))
    result = kbuild(store, "eval", str(store / "q.json"), "--project", "../../outside")
    assert result.exit_code == 2 and "the projects are: shop" in result.output and "Traceback" not in result.output


@pytest.mark.parametrize("project", [*ESCAPES, "ABSOLUTE"])
def test_an_mcp_tool_given_a_project_outside_the_store_names_the_projects_and_reads_nothing(store, project):
    project = str(store.parent / "outside") if project == "ABSOLUTE" else project
    for tool, arguments in (("search", {"query": "salary"}), ("context", {"question": "salary employee"})):
        said = refusal(store, tool, {**arguments, "project": project})
        assert f"no project {project!r} in the store; the projects are: shop" in said, said
    found = call(store, "search", {"query": "refund", "project": "shop"})
    assert "refunds" in json.dumps(found.structured_content)


# 5. the MCP server does not hand out a raw original

AWS_KEY = "AKIA" + "QX7TRB2MZL9WKD4F"
GITHUB_TOKEN = "ghp_" + "r8Tq2LmZk4Vb9XwN3sYc7Jd1Hf6Ge0Pa5UoI"
STRIPE_KEY = "sk_live_" + "4eC39HqLyjWDarjtT1zdp7dc"
PRIVATE_KEY = ("-----BEGIN OPENSSH PRIVATE KEY-----\nb3BlbnNzaC1rZXktdjEAAAAABG5vbmU=\n"
               "-----END OPENSSH PRIVATE KEY-----")
KEYS = f"""# Deploy keys

The deploy job signs in with {AWS_KEY} on every release.

Releases are tagged with {GITHUB_TOKEN} by the bot. Charges go through {STRIPE_KEY} in production.

```
{PRIVATE_KEY}
```
"""


def test_mcp_never_serves_a_raw_original_and_its_text_has_the_secrets_removed(tmp_path):
    from mcp.server.mcpserver.exceptions import ResourceNotFoundError

    small_store(tmp_path, {"keys.md": KEYS})
    assert kbuild(tmp_path).exit_code == 0
    raw = "kb/shop/raw/keys/original.md"
    assert AWS_KEY in (tmp_path / raw).read_text()  # the raw copy keeps the source as it was
    for page, instead in ((raw, "kb/shop/facts/keys/text.md"),
                          ("kb/shop/facts/../raw/keys/original.md", "kb/shop/facts/keys/text.md"),
                          ("kb/shop/raw/keys/meta.yml", "kb/shop/facts/keys/text.md"),
                          ("kb/shop/raw/index.md", "kb/shop/facts/index.md")):
        said = refusal(tmp_path, "show", {"page": page})
        assert "is a source's raw copy, which this server does not serve" in said and instead in said, said
        assert AWS_KEY not in said
    app = server(Store(Session(tmp_path, None, False)))
    with pytest.raises(ResourceNotFoundError):
        anyio.run(app.read_resource, "kbuild://" + raw)
    text = call(tmp_path, "show", {"page": "kb/shop/facts/keys/text.md"}).structured_content["text"]
    assert "[secret removed]" in text and "signs in with" in text
    assert not [s for s in (AWS_KEY, GITHUB_TOKEN, STRIPE_KEY, "b3BlbnNzaC1rZXktdjEAAAAABG5vbmU=") if s in text]
