"""kbuild as a user installs it: a wheel built from this checkout, installed (not editable) into a
fresh virtual environment, building a store through a model server in a separate process."""
from __future__ import annotations

import subprocess
import sys
import sysconfig
import venv
import zipfile
from pathlib import Path

import pytest
from openai_server import ScriptedServer

from model_replies import faithful_reply

REPO = Path(__file__).resolve().parent.parent
# slow: a wheel built and installed into a new virtual environment; the timeout: building it on a loaded machine
pytestmark = [pytest.mark.slow, pytest.mark.timeout(1200)]
PROMPTS = sorted(p.name for p in (REPO / "kbuild/model/prompts").iterdir())

KBUILDFILE = """
from pathlib import Path
from kbuild.rules import knowledge_base

kb = knowledge_base(Path(__file__).parent, model={{"base_url": "{url}/v1", "api_key": "test", "model": "scripted"}})
RULES = kb.rules
targets = kb.targets
before_build = kb.before_build
"""


@pytest.fixture(scope="module")
def installed(tmp_path_factory) -> Path:
    """A virtual environment with kbuild installed from its wheel. The dependencies come from the
    test environment, kbuild itself only from the wheel. The test environment may be a virtual
    environment itself (a user's), whose packages are not the system's: its site-packages are named
    in a .pth file, after the new environment's own (so the wheel's kbuild is found first, and an
    editable kbuild of the test environment, whose finder only its own .pth files install, never)."""
    out = tmp_path_factory.mktemp("wheel")
    subprocess.run([sys.executable, "-m", "pip", "wheel", "-q", "--no-deps", "-w", str(out),
                    str(REPO)], check=True, cwd=out)
    wheel = next(out.glob("kbuild-*.whl"))
    env = out / "venv"
    venv.create(env, system_site_packages=True, with_pip=False)
    python = env / "bin/python"
    own = subprocess.run([python, "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
                         capture_output=True, text=True, check=True).stdout.strip()
    tested = dict.fromkeys(sysconfig.get_paths()[kind] for kind in ("purelib", "platlib"))
    (Path(own) / "test-environment.pth").write_text("".join(f"{path}\n" for path in tested))
    subprocess.run([sys.executable, "-m", "pip", "--python", str(python), "install", "-q", "--no-deps",
                    "--force-reinstall", str(wheel)], check=True, cwd=out)
    return env


@pytest.fixture(autouse=True)
def as_a_user_runs_it(monkeypatch):
    """No PYTHONPATH: a checkout named there (a developer's way to test a worktree) would be
    imported before the wheel's kbuild, and the tests would not test the wheel."""
    monkeypatch.delenv("PYTHONPATH", raising=False)


def test_the_wheel_carries_every_prompt(installed):
    wheel = next(installed.parent.glob("kbuild-*.whl"))
    names = zipfile.ZipFile(wheel).namelist()
    assert PROMPTS and [n.rsplit("/", 1)[1] for n in names if "/prompts/" in n] == PROMPTS


def test_an_installed_kbuild_builds_through_a_model_server_and_its_doctor_passes(installed, tmp_path):
    where = subprocess.run([installed / "bin/python", "-c", "import kbuild.rules; print(kbuild.rules.__file__)"],
                           capture_output=True, text=True, cwd=tmp_path, check=True).stdout
    assert where.startswith(str(installed)), where  # the wheel's copy, not this checkout
    kbuild = installed / "bin/kbuild"
    with ScriptedServer(faithful_reply) as server:
        (tmp_path / "Kbuildfile.py").write_text(KBUILDFILE.format(url=server.url))
        (tmp_path / "note.md").write_text("# Backups\n\nThe database is backed up every night at 02:00 UTC. "
                                          "Backups are kept for 30 days.\n")
        (tmp_path / "kb/ops").mkdir(parents=True)
        (tmp_path / "kb/ops/sources.yml").write_text("sources:\n  - id: note\n    path: note.md\n")
        build = subprocess.run([kbuild, "-C", tmp_path], capture_output=True, text=True, timeout=600)
        assert build.returncode == 0, build.stdout + build.stderr
        assert "Traceback" not in build.stderr
        assert server.requests and server.errors == []
        fact = (tmp_path / "kb/ops/facts/note/backups.md").read_text()
        assert "## Rewritten" in fact and "written by scripted" in fact
        doctor = subprocess.run([kbuild, "-C", tmp_path, "doctor"], capture_output=True, text=True, timeout=120)
        assert doctor.returncode == 0, doctor.stdout
        assert f"every prompt file the rules name can be read ({len(PROMPTS)})" in doctor.stdout


def test_a_missing_prompt_is_one_line_and_a_doctor_failure(installed, tmp_path):
    """What a broken install looked like: every model page failed with a traceback, doctor said PASS."""
    prompts = Path(subprocess.run([installed / "bin/python", "-c", "import kbuild.model, pathlib; "
                                   "print(pathlib.Path(kbuild.model.__file__).parent / 'prompts')"],
                                  capture_output=True, text=True, cwd=tmp_path, check=True).stdout.strip())
    kbuild = installed / "bin/kbuild"
    with ScriptedServer(faithful_reply) as server:
        (tmp_path / "Kbuildfile.py").write_text(KBUILDFILE.format(url=server.url))
        (tmp_path / "note.md").write_text("# Note\n\nThe shop opens at nine.\n")
        (tmp_path / "kb/ops").mkdir(parents=True)
        (tmp_path / "kb/ops/sources.yml").write_text("sources:\n  - id: note\n    path: note.md\n")
        assert subprocess.run([kbuild, "-C", tmp_path], capture_output=True, timeout=600).returncode == 0
        hidden = prompts / "read.md.hidden"
        (prompts / "read.md").rename(hidden)
        try:
            (tmp_path / "note.md").write_text("# Note\n\nThe shop opens at ten.\n")
            build = subprocess.run([kbuild, "-C", tmp_path], capture_output=True, text=True, timeout=600)
            doctor = subprocess.run([kbuild, "-C", tmp_path, "doctor"], capture_output=True, text=True, timeout=120)
        finally:
            hidden.rename(prompts / "read.md")
    assert build.returncode != 0 and "Traceback" not in build.stdout + build.stderr
    assert "read.md" in build.stdout + build.stderr
    assert doctor.returncode == 1 and "FAIL" in doctor.stdout and "read.md" in doctor.stdout


def test_the_benchmarks_measure_the_installed_kbuild_from_a_checkout(installed):
    """`python -m benchmarks` runs from the checkout, whose kbuild/ has no kbuild.rules: the
    benchmarks take the installed kbuild, as a user runs it."""
    where = subprocess.run([installed / "bin/python", "-c",
                            "import benchmarks.__main__, kbuild.rules; print(kbuild.rules.__file__)"],
                           capture_output=True, text=True, cwd=REPO, check=True).stdout
    assert where.startswith(str(installed)), where
