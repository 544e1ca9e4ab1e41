"""The form every lecture keeps (issue 12): a header, stored executed, short cells, a "Try it"
cell, no test scaffolding and no widget moved by code.

Numerical claims are asserted inside the lectures themselves and run under nbval; this file
checks what nbval cannot see.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

NOTEBOOKS = Path(__file__).resolve().parents[1] / "notebooks"
LECTURES = sorted(NOTEBOOKS.glob("*.ipynb"))
MAX_CODE_LINES = 25


def _cells(path: Path) -> list[dict]:
    return json.loads(path.read_text(encoding="utf-8"))["cells"]


def _source(cell: dict) -> str:
    src = cell["source"]
    return src if isinstance(src, str) else "".join(src)


def test_lectures_are_numbered_without_gaps():
    names = [p.name for p in LECTURES]
    assert names, "no lectures found"
    for i, name in enumerate(names, start=1):
        assert re.fullmatch(rf"{i:02d}_[a-z0-9]+(_[a-z0-9]+)*\.ipynb", name), (
            f"{name}: lectures are named NN_snake_case.ipynb and numbered 01, 02, ... without gaps"
        )


@pytest.mark.parametrize("path", LECTURES, ids=lambda p: p.stem)
def test_header_states_goals_and_prerequisite(path):
    head = _source(_cells(path)[0])
    number = path.name[:2]
    assert head.startswith(f"# {number} · "), f"{path.name}: the first cell is '# {number} · Title'"
    assert "**What you will learn**" in head, f"{path.name}: the header lists learning goals"
    assert "**Before this notebook:**" in head, f"{path.name}: the header names the prerequisite"
    for target in re.findall(r"\]\(([^)#]+\.ipynb)\)", head):
        assert (NOTEBOOKS / target).is_file(), f"{path.name}: the header links to missing {target}"


@pytest.mark.parametrize("path", LECTURES, ids=lambda p: p.stem)
def test_stored_executed_without_errors(path):
    for i, cell in enumerate(_cells(path)):
        if cell["cell_type"] != "code" or not _source(cell).strip():
            continue
        assert cell.get("execution_count") is not None, f"{path.name} cell {i} is not executed"
        for out in cell.get("outputs", []):
            assert out.get("output_type") != "error", f"{path.name} cell {i} stored an error"


@pytest.mark.parametrize("path", LECTURES, ids=lambda p: p.stem)
def test_code_cells_are_short(path):
    for i, cell in enumerate(_cells(path)):
        if cell["cell_type"] == "code":
            n = len(_source(cell).strip().splitlines())
            assert n <= MAX_CODE_LINES, (
                f"{path.name} cell {i} has {n} lines; split it (at most {MAX_CODE_LINES})"
            )


@pytest.mark.parametrize("path", LECTURES, ids=lambda p: p.stem)
def test_no_scaffolding_and_no_slider_moved_by_code(path):
    for i, cell in enumerate(_cells(path)):
        if cell["cell_type"] != "code":
            continue
        src = _source(cell)
        assert "sys.path" not in src, f"{path.name} cell {i}: no sys.path hacks"
        assert not re.search(r"\.value\s*=(?!=)", src), (
            f"{path.name} cell {i} moves a widget by code; after Run All the widget must show "
            "what the student set (test widgets in tests/)"
        )
        assert "CI check" not in src, f"{path.name} cell {i}: test scaffolding belongs in tests/"


@pytest.mark.parametrize("path", LECTURES, ids=lambda p: p.stem)
def test_has_a_try_it_cell_followed_by_code(path):
    cells = _cells(path)
    found = [
        i for i, c in enumerate(cells[:-1])
        if c["cell_type"] == "markdown" and _source(c).lstrip().startswith("**Try it.**")
        and cells[i + 1]["cell_type"] == "code"
    ]
    assert found, f"{path.name}: add an ungraded '**Try it.**' markdown cell followed by its code cell"


@pytest.mark.parametrize("path", LECTURES, ids=lambda p: p.stem)
def test_claims_are_checked(path):
    code = "\n".join(_source(c) for c in _cells(path) if c["cell_type"] == "code")
    n = len(re.findall(r"^\s*(assert\b|np\.testing\.assert)", code, flags=re.M))
    assert n >= 3, f"{path.name}: only {n} asserts; assert the claims the prose makes"
