"""``make check``: run your exercise notebooks as *Restart & Run All* does and show each
question's check report, as the notebook shows it.

::

    python -m kpca_lib.course.selfcheck [NOTEBOOK ...]     # default: exercises/*.ipynb
    python -m kpca_lib.course.selfcheck --hw 01            # one homework: exercises/01_*.ipynb
    make check HW=01                                       # the same, through make

Each notebook runs from the top in a fresh kernel (nothing is saved back to it). For every
question the report of its check cell is printed: one ✔ or ✘ line per public check, with
what failed and a hint. A cell of yours that raised is named, with the exception, since the
questions after it then see a name missing. The last line counts the questions whose public
checks all pass. A ✘ is a result, not an error: the exit code is 0 whenever every notebook
ran (``--strict``: 1 unless every question passes), 2 when a notebook could not be found,
read or run. The grader runs the same checks again on fresh inputs, and hidden checks besides.
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

__all__ = ["Report", "run_notebook", "select", "main"]

#: Seconds a cell may run before it is stopped (a cell of an exercise takes well under 10).
CELL_TIMEOUT = 120


class Report:
    """One notebook's outcome: ``questions`` (question id -> its check report, ✔/✘ lines),
    ``raised`` (lines naming the student's cells that raised), ``seconds``."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self.questions: dict[str, str] = {}
        self.raised: list[str] = []
        self.seconds = 0.0

    @property
    def passed(self) -> list[str]:
        """Questions whose report ends with a ✔ summary line."""
        return [q for q, text in self.questions.items() if _last_line(text).startswith("✔")]


def _last_line(text: str) -> str:
    lines = [line for line in text.strip().splitlines() if line.strip()]
    return lines[-1].strip() if lines else ""


def _role(cell: Any) -> dict[str, Any]:
    meta = cell.get("metadata", {}).get("kpca", {})
    return meta if isinstance(meta, dict) else {}


def run_notebook(path: Path, timeout: float = CELL_TIMEOUT) -> Report:
    """Run ``path`` in a fresh kernel (its folder as the working directory) and read back
    each check cell's printed report and each answer cell that raised."""
    import nbformat
    from nbclient import NotebookClient
    from traitlets.config import Config

    report = Report(path)
    nb = nbformat.read(path, as_version=4)
    with tempfile.TemporaryDirectory(prefix="kpca-check-") as sockets:
        # IPC, not TCP: a local kernel needs no port, and warns of none. Its sockets' path
        # is absolute: the kernel runs in the notebook's folder. The client creates (so owns)
        # the kernel manager: it shuts the kernel down and closes its own sockets.
        ipc = Config({"KernelManager": {"transport": "ipc", "ip": f"{sockets}/kernel"}})
        client = NotebookClient(nb, kernel_name="python3", config=ipc, timeout=timeout,
                                allow_errors=True,
                                resources={"metadata": {"path": str(path.parent)}})
        start = time.perf_counter()
        # The kernel's own stderr goes to a file, shown only if the run fails: on a clean
        # run it holds only noise, such as libzmq's rare "Assertion failed: pfd.revents &
        # POLLIN (src/signaler.cpp)" abort while the kernel shuts down.
        with tempfile.TemporaryFile() as kernel_stderr:
            try:
                client.execute(stderr=kernel_stderr)
            except Exception:
                kernel_stderr.seek(0)
                tail = kernel_stderr.read()[-2000:].decode(errors="replace").strip()
                if tail:
                    print(f"== {path}: the kernel's stderr:\n{tail}", file=sys.stderr)
                raise
        report.seconds = time.perf_counter() - start
    for index, cell in enumerate(nb.cells):
        if cell.cell_type != "code":
            continue
        role = _role(cell)
        outputs = cell.get("outputs", [])
        if role.get("role") == "check" and role.get("question"):
            report.questions[str(role["question"])] = "".join(
                o.get("text", "") for o in outputs
                if o.get("output_type") == "stream" and o.get("name") == "stdout")
        for o in outputs:
            if o.get("output_type") == "error" and role.get("role") in ("answer", None):
                first = next((line for line in cell.source.splitlines() if line.strip()), "")
                report.raised.append(f"cell {index + 1} (`{first.strip()[:60]}`) raised "
                                     f"{o.get('ename')}: {str(o.get('evalue'))[:200]}")
    return report


def _print_report(report: Report, out: Any) -> None:
    print(f"== {report.path} ({report.seconds:.1f} s)", file=out)
    for line in report.raised:
        print(f"  ✘ {line}: the questions after it may miss what it defines.", file=out)
    for text in report.questions.values():
        print(text.rstrip("\n"), file=out)
    print(f"-> {len(report.passed)} of {len(report.questions)} question(s) pass their public "
          "checks", file=out)
    print(file=out)


DESCRIPTION = ("Run your exercise notebooks as Restart & Run All does and show each question's public "
               "checks (✔/✘), as the notebooks show them.")
EPILOG = ("A ✘ is a result, not an error: the exit code is 0 once every notebook ran (1 with --strict "
          "when a question fails), 2 when a notebook could not be found, read or run. Through make: "
          "make check (every homework) or make check HW=01 (one).")


def select(hw: str, folder: Path = Path("exercises")) -> list[Path]:
    """The exercise notebooks of homework ``hw`` (``"01"``, ``"1"`` or ``"01_feature_maps"``)."""
    hw = hw.strip()
    number = hw.zfill(2) if hw.isdigit() else hw
    return sorted(p for p in folder.glob("*.ipynb") if p.stem == number or p.stem.startswith(number + "_"))


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of ``python -m kpca_lib.course.selfcheck``; see the module's docstring."""
    parser = argparse.ArgumentParser(prog="make check", description=DESCRIPTION, epilog=EPILOG)
    parser.add_argument("notebooks", nargs="*", type=Path,
                        help="exercise notebooks (default: exercises/*.ipynb, or those of --hw)")
    parser.add_argument("--hw", default=os.environ.get("HW", ""),
                        help="one homework by its number, e.g. 01 (default: $HW, as make check HW=01 sets "
                             "it; empty: every homework)")
    parser.add_argument("--strict", action="store_true",
                        help="exit 1 unless every question passes its public checks")
    args = parser.parse_args(argv)
    if args.notebooks:
        paths = list(args.notebooks)
    elif args.hw:
        paths = select(args.hw)
        if not paths:
            found = ", ".join(p.stem for p in sorted(Path("exercises").glob("*.ipynb"))) or "none"
            print(f"make check: no homework {args.hw!r} in exercises/ (there: {found}).", file=sys.stderr)
            return 2
    else:
        paths = sorted(Path("exercises").glob("*.ipynb"))
    if not paths:
        print("make check: no exercise notebook found (run it in the course folder).",
              file=sys.stderr)
        return 2
    total = passed = 0
    for path in paths:
        try:
            report = run_notebook(path)
        except Exception as exc:  # a notebook that cannot be read or run: say so, go on
            print(f"== {path}: could not be run ({type(exc).__name__}: {exc})", file=sys.stderr)
            return 2
        _print_report(report, sys.stdout)
        total += len(report.questions)
        passed += len(report.passed)
    mark = "✔" if passed == total else "✘"
    print(f"{mark} {passed} of {total} question(s) pass their public checks; the grader runs "
          "them again on fresh inputs, and hidden checks besides.")
    return 1 if args.strict and passed != total else 0


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
