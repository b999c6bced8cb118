"""Plug-ins as a user installs them: real packages (tests/data/plugins/) pip-installed into a
virtual environment, found through their `kbuild` entry point, converting a format, answering as
a backend a Kbuildfile names, and failing one source, or loading not at all, with one line."""
from __future__ import annotations

import json
import subprocess
import sys
import sysconfig
import venv
from pathlib import Path

import pytest

PLUGINS = Path(__file__).parent / "data" / "plugins"
# slow: pip builds and installs two small wheels into a new virtual environment; nothing here waits on a clock
pytestmark = [pytest.mark.slow, pytest.mark.timeout(900)]

KBUILDFILE = """
from pathlib import Path
from kbuild.rules import knowledge_base

kb = knowledge_base(Path(__file__).parent, model={model})
RULES = kb.rules
targets = kb.targets
before_build = kb.before_build
"""


@pytest.fixture(scope="module")
def python(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A virtual environment holding the plug-in packages, installed by pip from their folders.
    kbuild and its dependencies come from the test environment, whose site folders (with their
    .pth files: an editable kbuild's among them) are added after the new environment's own. pip
    builds the packages as tests/test_install.py builds kbuild's wheel (setuptools from PyPI or
    pip's cache)."""
    env = tmp_path_factory.mktemp("plugins") / "venv"
    venv.create(env, with_pip=False)
    python = env / "bin" / "python"
    own = subprocess.run([python, "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
                         capture_output=True, text=True, check=True).stdout.strip()
    tested = dict.fromkeys(sysconfig.get_paths()[kind] for kind in ("purelib", "platlib"))
    (Path(own) / "test-environment.pth").write_text("".join(f"import site; site.addsitedir({p!r})\n" for p in tested))
    subprocess.run([sys.executable, "-m", "pip", "--python", str(python), "install", "-q", "--no-deps",
                    str(PLUGINS / "kbuild-upper"), str(PLUGINS / "kbuild-broken")],
                   check=True, cwd=env)
    return python


def run(python: Path, root: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([python, "-m", "kbuild", "-C", str(root), *args], capture_output=True, text=True,
                          timeout=600)


def project(root: Path, model: str, sources: dict[str, str]) -> None:
    (root / "Kbuildfile.py").write_text(KBUILDFILE.format(model=model))
    (root / "kb/p").mkdir(parents=True)
    listed = "".join(f"  - id: {name.replace('.', '-')}\n    path: {name}\n" for name in sources)
    (root / "kb/p/sources.yml").write_text(f"sources:\n{listed}")
    for name, text in sources.items():
        (root / name).write_text(text)


def test_kbuild_plugins_lists_each_installed_plugin_with_its_version_and_formats(python, tmp_path):
    listed = run(python, tmp_path, "plugins")
    assert "upper: kbuild-upper 0.1.0: converts .foo .boom; backends upper" in listed.stdout
    assert "backends offline, openai" in listed.stdout  # kbuild's own, on the same hooks
    # a plug-in that cannot be imported is one line, naming it, and the exit code says so
    assert listed.returncode == 1 and "Traceback" not in listed.stderr
    problem = [line for line in listed.stderr.splitlines() if "kbuild-broken" in line]
    assert problem == ["kbuild: plug-in kbuild-broken 2.0.0 cannot be loaded (ModuleNotFoundError: No module named "
                       "'kbuild_broken_needs_this_library'); reinstall it, or uninstall it"]
    answer = json.loads(run(python, tmp_path, "plugins", "--json").stdout)
    upper = next(p for p in answer["plugins"] if p["name"] == "upper")
    assert answer["schema"] == "kbuild.plugins/1"
    assert (upper["distribution"], upper["version"], upper["converts"], upper["error"]) == (
        "kbuild-upper", "0.1.0", [".foo", ".boom"], None)


def test_a_source_builds_through_its_plugin_and_one_that_raises_fails_alone(python, tmp_path):
    project(tmp_path, "None", {"note.foo": "Opening hours\nThe shop opens at nine.\n",
                               "bang.boom": "anything\n",
                               "plain.md": "# Plain\n\nThe shop closes at five.\n"})
    build = run(python, tmp_path)
    output = build.stdout + build.stderr
    assert build.returncode == 1 and "Traceback" not in output  # the exit code says a source failed
    failed = [line for line in output.splitlines() if "bang-boom" in line and "plug-in" in line]
    assert len(failed) == 1 and "kbuild-upper 0.1.0" in failed[0] and "RuntimeError: cannot parse 9 bytes" in failed[0]
    assert (tmp_path / "kb/p/facts/note-foo/text.md").read_text().startswith("# OPENING HOURS\n\nTHE SHOP OPENS AT NINE.")
    assert "The shop closes at five." in (tmp_path / "kb/p/facts/plain-md/text.md").read_text()  # the build went on
    assert not (tmp_path / "kb/p/facts/bang-boom/text.md").exists()


def test_the_plugins_version_is_in_the_fingerprint_of_what_it_converts(python, tmp_path):
    params = subprocess.run([python, "-c", "from kbuild.rules.facts import text; print(text.params['plugins'])"],
                            capture_output=True, text=True, check=True, cwd=tmp_path).stdout
    assert "'kbuild-upper': '0.1.0'" in params


def test_a_kbuildfile_names_a_backend_a_plugin_registers(python, tmp_path):
    project(tmp_path, '{"backend": "upper"}', {"note.md": "# Hours\n\nThe shop opens at nine. It closes at five.\n"})
    build = run(python, tmp_path)
    assert build.returncode == 0, build.stdout + build.stderr
    summary = (tmp_path / "kb/p/facts/note-md/index.md").read_text()
    assert "THE SHOP OPENS AT NINE" in summary and "in capitals (kbuild-upper)" in summary
    assert "no model configured" not in build.stdout + build.stderr  # the offline notice is for no backend named
    doctor = run(python, tmp_path, "doctor")  # it crashed: a plug-in's backend has no OpenAI settings
    assert doctor.returncode == 0 and "model: extractive, in capitals (kbuild-upper)" in doctor.stdout, doctor.stderr


def test_a_backend_no_plugin_registers_is_one_line_naming_the_registered_ones(python, tmp_path):
    project(tmp_path, '{"backend": "nowhere"}', {"note.md": "# Hours\n\nThe shop opens at nine.\n"})
    build = run(python, tmp_path)
    assert build.returncode == 2 and "Traceback" not in build.stderr
    assert "backend 'nowhere' is not registered" in build.stderr and "offline, openai, upper" in build.stderr
