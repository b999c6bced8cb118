"""Configuration is an input: after any sequence of source edits and Kbuildfile setting changes,
an incremental build ends exactly as a clean build of the same inputs would (pages and lock)."""
from __future__ import annotations

import shutil
from pathlib import Path

import pytest
from click.testing import Result
from conftest import kbuild
from hypothesis import HealthCheck, given, settings, strategies as st

pytestmark = pytest.mark.slow  # hypothesis over builds and setting changes

KBUILDFILE = """from pathlib import Path
from kbuild.rules import knowledge_base

kb = knowledge_base(Path(__file__).parent, floor_tokens={floor}, cap_tokens={cap})
RULES = kb.rules
targets = kb.targets
"""
SENTENCES = ["The shop opens at nine.", "Refunds are paid within 14 days.", "Each order MUST carry a number.",
             "Parcels leave the depot at noon.", "A receipt is sent by mail.", "Returns need the receipt."]
DOC = "# Shop\n\n{a}\n\n## Orders\n\n{b} {c}\n\n## Returns\n\n{d}\n\n### Receipts\n\n{e}\n"
SIZES = [(8, 16), (15, 40), (40, 100)]

edits = st.lists(st.one_of(
    st.tuples(st.just("size"), st.sampled_from(SIZES)),
    st.tuples(st.just("edit"), st.lists(st.sampled_from(SENTENCES), min_size=5, max_size=5)),
), min_size=1, max_size=3)


def kbuild_ok(root: Path, *args: str) -> Result:
    result = kbuild(root, *args)
    assert result.exit_code == 0, result.output
    return result


def write(root: Path, size: tuple[int, int], words: list[str]) -> None:
    (root / "Kbuildfile.py").write_text(KBUILDFILE.format(floor=size[0], cap=size[1]))
    (root / "doc.md").write_text(DOC.format(**dict(zip("abcde", words))))
    (root / "kb/shop").mkdir(parents=True, exist_ok=True)
    (root / "kb/shop/sources.yml").write_text("sources:\n  - id: doc\n    path: doc.md\n")


def state(root: Path) -> tuple[dict[str, bytes], str]:
    files = {p.relative_to(root).as_posix(): p.read_bytes() for p in sorted((root / "kb").rglob("*")) if p.is_file()}
    return files, (root / "kbuild.lock").read_text()


@settings(max_examples=8, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(steps=edits)
def test_incremental_equals_clean_across_source_edits_and_setting_changes(tmp_path_factory, steps):
    incremental = tmp_path_factory.mktemp("incremental")
    size, words = SIZES[1], SENTENCES[:5]
    write(incremental, size, words)
    kbuild_ok(incremental)
    for kind, value in steps:
        if kind == "size":
            size = value
        else:
            words = value
        write(incremental, size, words)
        kbuild_ok(incremental)
        clean = tmp_path_factory.mktemp("clean")
        write(clean, size, words)
        kbuild_ok(clean)
        assert state(incremental) == state(clean), (kind, value)
        assert "up to date" in kbuild_ok(incremental, "status").output
        shutil.rmtree(clean)
