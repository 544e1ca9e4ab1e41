"""``kpca-course release``: generate ``exercises/`` from ``solutions/``.

Each ``solutions/NN_*.ipynb`` becomes ``exercises/NN_*.ipynb`` (see
:func:`kpca_lib.course.grading.judge.notebooks.release_notebook`): every ``### BEGIN SOLUTION`` …
``### END SOLUTION`` region becomes a stub, hidden checks and solution-only cells are
removed, outputs are cleared, cell ids are kept, and check cells are read-only
(``editable: false``, ``deletable: false``). The output is deterministic, so
``release --check`` can compare bytes.
"""

from __future__ import annotations

from pathlib import Path

import nbformat

from .grading.judge.notebooks import read_solution, release_notebook

__all__ = ["default_paths", "render", "release", "SOLUTION_GLOB"]

SOLUTION_GLOB = "[0-9][0-9]_*.ipynb"


def default_paths() -> tuple[Path, Path]:
    """``solutions/`` and ``exercises/`` of the repository (or of the current folder)."""
    root = Path(__file__).resolve().parents[2]
    if not (root / "solutions").is_dir():
        root = Path.cwd()
    return root / "solutions", root / "exercises"


def render(solution_path: Path) -> str:
    """The exercise notebook generated from one solutions notebook, as text."""
    solution = read_solution(solution_path)
    nb = release_notebook(solution)
    nbformat.validate(nb)
    return nbformat.writes(nb, version=4) + "\n"


def release(solutions: Path, exercises: Path, *, check: bool = False) -> list[str]:
    """Write (or with ``check``, compare) every exercise; return the differing file names.

    With ``check`` nothing is written; an exercise without a solution, a missing
    exercise, or one whose bytes differ from what would be generated is reported.
    Without ``check``, stale exercises (no solution any more) are deleted.
    """
    solutions, exercises = Path(solutions), Path(exercises)
    sources = sorted(solutions.glob(SOLUTION_GLOB))
    if not sources:
        raise FileNotFoundError(f"no solutions notebooks ({SOLUTION_GLOB}) in {solutions}")
    differing: list[str] = []
    expected = set()
    if not check:
        exercises.mkdir(parents=True, exist_ok=True)
    for src in sources:
        target = exercises / src.name
        expected.add(target.name)
        text = render(src)
        current = target.read_text(encoding="utf-8") if target.exists() else None
        if current != text:
            differing.append(str(target))
            if not check:
                tmp = target.with_suffix(".ipynb.tmp")
                tmp.write_text(text, encoding="utf-8")
                tmp.replace(target)
    if exercises.is_dir():
        for stale in sorted(exercises.glob("*.ipynb")):
            if stale.name not in expected:
                differing.append(str(stale))
                if not check:
                    stale.unlink()
    return differing
