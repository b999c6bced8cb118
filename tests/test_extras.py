"""The optional parts: `kbuild mcp` needs the `mcp` extra, a remote call cache the `s3` extra. Without
them kbuild says which `pip install` brings them, in one line, and nothing else imports them."""
from __future__ import annotations

import subprocess
import sys

import pytest
from conftest import kbuild
from openai_server import ScriptedServer
from test_model import answer, project

OPTIONAL = ("mcp", "mcp_types", "obstore")

IMPORTED_AFTER = """
import sys
from click.testing import CliRunner
from kbuild.cli import main
result = CliRunner().invoke(main, sys.argv[1:])
assert result.exit_code == 0, result.output
print(sorted({name.split(".")[0] for name in sys.modules} & set(%r)))
""" % (OPTIONAL,)


def missing(monkeypatch: pytest.MonkeyPatch, *packages: str) -> None:
    """Import these packages as if they were not installed (ImportError), their modules loaded already included."""
    for name in [*packages, *(n for n in sys.modules if n.split(".")[0] in packages)]:
        monkeypatch.setitem(sys.modules, name, None)


def test_help_and_a_build_import_no_optional_package(tmp_path):
    with ScriptedServer(answer, string_bounds=True) as server:
        root = project(tmp_path, server)
        for args in (["--help"], ["-C", str(root), "build"]):
            run = subprocess.run([sys.executable, "-c", IMPORTED_AFTER, *args], capture_output=True, text=True,
                                 timeout=300)
            assert run.returncode == 0, run.stdout + run.stderr
            assert run.stdout.splitlines()[-1] == "[]", (args, run.stdout)
        assert server.requests  # the build called the model: the call cache, and its remote, were in play


def test_kbuild_mcp_without_the_mcp_extra_says_how_to_install_it(tmp_path, monkeypatch):
    missing(monkeypatch, "mcp", "mcp_types")
    with ScriptedServer(answer) as server:
        result = kbuild(project(tmp_path, server), "mcp")
    assert result.exit_code != 0 and "Traceback" not in result.output
    assert result.output.strip().splitlines() == ["kbuild: kbuild mcp needs the MCP SDK: pip install 'kbuild[mcp]'"]


def test_a_remote_cache_without_the_s3_extra_is_one_warning_and_the_build_goes_on(tmp_path, monkeypatch):
    missing(monkeypatch, "obstore")
    monkeypatch.setenv("KBUILD_CACHE_URL", "s3://team-bucket/calls")
    with ScriptedServer(answer, string_bounds=True) as server:
        root = project(tmp_path, server)
        result = kbuild(root, "build")
    assert result.exit_code == 0 and "Traceback" not in result.output, result.output
    warnings = [line for line in result.output.splitlines() if line.startswith("warning:")]
    assert warnings == ["warning: remote call cache s3://team-bucket/calls is not available (it needs obstore: "
                        "pip install 'kbuild[s3]'); this build uses the local cache only"], result.output
    assert (root / "kb/pay/facts").is_dir()
