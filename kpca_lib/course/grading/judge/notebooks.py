"""Cell roles in notebook metadata, and the notebook the grader runs.

Every code cell of a ``solutions/NN_*.ipynb`` notebook carries ``metadata["kpca"]``::

    {"role": "question", "question": "q1_phi_p3"}   # defines the question (released read-only)
    {"role": "answer", "question": "q1_phi_p3"}     # answer cell
    {"role": "check", "question": "q1_phi_p3"}      # public check (read-only)
    {"role": "hidden-check", "question": "q1_phi_p3", "points": 1}  # solutions only
    {"role": "setup"}             # data and imports the answers need (run by the grader)
    {"role": "demo"}              # figures and widgets (not run by the grader)
    {"role": "solution-only"}     # any cell type; removed from the exercises

A question cell calls :func:`~kpca_lib.course.grading.judge.registry.define_question` (id,
title, names, total points, inputs, probe, public checks); its ``points`` must equal its
public checks' plus its hidden checks' points. An answer cell may carry ``"stubs"``: one
replacement per ``### BEGIN SOLUTION`` region (default: ``raise NotImplementedError(...)``);
every stub starts with ``# YOUR CODE HERE``. The notebook's own metadata has
``{"kpca": {"assignment": "<stem>", "questions": [...]}}``.

Answer cells are found in a submission by cell id and, failing that, by the
metadata (``question`` and the ``slot`` written by the release, i.e. the
cell id in ``solutions/``); if several cells match, the last one wins.
"""

from __future__ import annotations

import copy
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import nbformat

from .dependencies import binds, free_reads, reads, top_binds
from .questions import Check, Question
from .registry import collecting

__all__ = [
    "ROLES",
    "meta",
    "Solution",
    "read_solution",
    "load_hidden_checks",
    "load_questions",
    "extract_answers",
    "with_answers",
    "grading_notebook",
    "GradingNotebook",
    "BEGIN",
    "END",
]

ROLES = ("setup", "question", "demo", "answer", "check", "hidden-check", "solution-only")
BEGIN = "### BEGIN SOLUTION"
END = "### END SOLUTION"
NB_VERSION = (4, 5)


def meta(cell: Any) -> dict[str, Any]:
    """The ``kpca`` metadata of a cell (empty dict when absent or malformed)."""
    m = cell.get("metadata", {}) if isinstance(cell, dict) else {}
    k = m.get("kpca", {}) if isinstance(m, dict) else {}
    return k if isinstance(k, dict) else {}


def with_answers(exercise: Any, solution_nb: Any) -> Any:
    """A copy of the released ``exercise`` whose answer cells hold ``solution_nb``'s answers
    (matched by cell id): what a student who got everything right submits. Used by tests
    and benchmarks to build submissions."""
    answers = {c.id: c.source for c in solution_nb.cells if meta(c).get("role") == "answer"}
    out = copy.deepcopy(exercise)
    for cell in out.cells:
        if cell.id in answers:
            cell.source = answers[cell.id]
    return out


@dataclass
class Solution:
    """A parsed ``solutions/`` notebook."""

    path: Path
    nb: Any
    assignment: str
    questions: list[str]
    answer_cells: dict[str, list[str]]  # question -> ids of its answer cells, in order
    hidden: dict[str, list[Check]] = field(default_factory=dict)
    #: The questions as the notebook's question cells define them, by id.
    defs: dict[str, Question] = field(default_factory=dict)

    @property
    def points(self) -> dict[str, float]:
        """Each question's points, in order, as its question cell declares them."""
        return {qid: self.defs[qid].total_points for qid in self.questions}

    @property
    def max_score(self) -> float:
        return float(sum(self.points.values()))

    def question(self, qid: str) -> Question:
        """The question ``qid`` as this notebook defines it."""
        return self.defs[qid]


def load_questions(nb: Any, name: str = "notebook") -> dict[str, Question]:
    """Execute the question cells of a solutions notebook (trusted code, in this process)
    and return the questions they define, by id; ``ValueError`` on problems."""
    out: dict[str, Question] = {}
    for cell in nb.cells:
        if cell.cell_type != "code" or meta(cell).get("role") != "question":
            continue
        qid = meta(cell).get("question")
        with collecting() as found:
            try:
                exec(compile(cell.source, f"<question cell {cell.get('id')}>", "exec"),
                     {"__name__": "kpca_question_cell"})
            except Exception as exc:
                raise ValueError(f"{name}: question cell {cell.get('id')} fails: "
                                 f"{type(exc).__name__}: {exc}") from exc
        if list(found) != [qid]:
            raise ValueError(f"{name}: question cell {cell.get('id')} (question {qid!r}) must define "
                             f"exactly that question with define_question; it defines {list(found)}.")
        if qid in out:
            raise ValueError(f"{name}: question {qid} has two question cells.")
        out[qid] = found[qid].build()
    return out


def _hidden_from_cell(cell: Any) -> Check:
    m = meta(cell)
    qid = m.get("question")
    found: list[Any] = []

    def register(question_id: str, fn: Any, namespace: Any = None, inputs: Any = None) -> None:
        found.append((question_id, fn, inputs))

    import kpca_lib.course.checks as public_checks

    ns: dict[str, Any] = {"__name__": "kpca_hidden_check"}
    original = public_checks.run_hidden_check
    public_checks.run_hidden_check = register  # type: ignore[assignment]
    try:
        # Trusted code: it comes from solutions/, never from a submission.
        exec(compile(cell.source, f"<hidden check {cell.get('id')}>", "exec"), ns)
    finally:
        public_checks.run_hidden_check = original  # type: ignore[assignment]
    if len(found) != 1 or found[0][0] != qid:
        raise ValueError(
            f"hidden-check cell {cell.get('id')} must call run_hidden_check({qid!r}, fn, globals()) once."
        )
    _, fn, draw = found[0]
    if not callable(fn) or (draw is not None and not callable(draw)):
        raise ValueError(f"hidden-check cell {cell.get('id')}: run_hidden_check needs a function "
                         "(and inputs=, when given, a function of rng).")
    description = (fn.__doc__ or fn.__name__).strip().splitlines()[0]
    return Check(f"{qid}.{fn.__name__}", description, float(m.get("points", 1)), fn, hidden=True,
                 inputs=draw)


def load_hidden_checks(nb: Any) -> dict[str, list[Check]]:
    """The hidden checks of a solutions notebook, as functions for the grader's own process."""
    out: dict[str, list[Check]] = {}
    for cell in nb.cells:
        if cell.cell_type == "code" and meta(cell).get("role") == "hidden-check":
            check = _hidden_from_cell(cell)
            out.setdefault(meta(cell)["question"], []).append(check)
    return out


def read_solution(path: str | Path, *, with_hidden: bool = True) -> Solution:
    """Parse a solutions notebook, run its question cells and validate it (``ValueError`` on problems)."""
    path = Path(path)
    nb = nbformat.read(path, as_version=4)
    defs = load_questions(nb, path.name)
    questions: list[str] = []
    answers: dict[str, list[str]] = {}
    for i, cell in enumerate(nb.cells):
        m = meta(cell)
        role = m.get("role")
        if cell.cell_type == "code" and role not in ROLES:
            raise ValueError(f"{path.name}: code cell {i} (id {cell.get('id')}) has no valid kpca role: {role!r}.")
        if role in ("answer", "check", "hidden-check"):
            qid = m.get("question")
            if qid not in defs:
                raise ValueError(
                    f"{path.name}: cell {cell.get('id')} belongs to question {qid!r}, which no question "
                    "cell defines; add a cell with role 'question' calling define_question before it."
                )
            if role == "answer":
                if qid not in questions:
                    questions.append(qid)
                answers.setdefault(qid, []).append(cell.id)
    for qid in defs:
        if qid not in questions:
            raise ValueError(f"{path.name}: question {qid} has no answer cell (role 'answer').")
    hidden = load_hidden_checks(nb) if with_hidden else {}
    for qid in questions:
        q = defs[qid]
        expected = q.public_points + sum(c.points for c in hidden.get(qid, []))
        if with_hidden and abs(expected - q.total_points) > 1e-9:
            raise ValueError(
                f"{path.name}: question {qid} declares points={q.total_points:g}, but its public "
                f"checks ({q.public_points:g}) and hidden checks "
                f"({expected - q.public_points:g}) are worth {expected:g}."
            )
    return Solution(path, nb, path.stem, questions, answers, hidden, defs)


# --------------------------------------------------------------------------- submissions
def _source(cell: dict[str, Any]) -> str | None:
    """A cell's source as text, or ``None`` when it is malformed (not text, not a list of text)."""
    src = cell.get("source", "")
    if isinstance(src, list):
        if not all(isinstance(s, str) for s in src):
            return None
        src = "".join(src)
    if not isinstance(src, str):
        return None
    try:
        src.encode("utf-8")
    except UnicodeEncodeError:  # lone surrogates from JSON escapes: not runnable text
        return None
    return src


def extract_answers(submission: Any, solution: Solution) -> tuple[dict[str, str], list[str]]:
    """The student's source for every answer cell of ``solution`` (by solution cell id).

    A submission cell answers solution cell ``C`` when its id is ``C``, or its
    ``kpca`` metadata names ``slot`` ``C``; a code cell only. The last match wins.
    Returns ``(sources, notes)``; a missing answer is absent from ``sources``.
    Hostile structure is tolerated: cells that are not objects, ids, slots or cell
    types that are not strings are ignored; a matching cell whose source is not text
    counts as missing, with a note.
    """
    wanted = {cid for ids in solution.answer_cells.values() for cid in ids}
    sources: dict[str, str] = {}
    counts: dict[str, int] = {}
    malformed: set[str] = set()
    cells = submission.get("cells", []) if isinstance(submission, dict) else []
    for cell in cells if isinstance(cells, list) else []:
        if not isinstance(cell, dict) or cell.get("cell_type") != "code":
            continue
        m = meta(cell)
        cid, slot_meta = cell.get("id"), m.get("slot")
        if isinstance(cid, str) and cid in wanted:
            slot = cid
        elif isinstance(slot_meta, str) and slot_meta in wanted:
            slot = slot_meta
        else:
            continue
        src = _source(cell)
        counts[slot] = counts.get(slot, 0) + 1
        if src is None:
            malformed.add(slot)
            sources.pop(slot, None)
            continue
        malformed.discard(slot)
        sources[slot] = src
    notes = []
    for qid, ids in solution.answer_cells.items():
        for cid in ids:
            if cid in malformed:
                notes.append(f"{qid}: the answer cell (id {cid}) has a malformed source (not text); "
                             "this part of the question scores 0.")
            elif cid not in sources:
                notes.append(f"{qid}: the answer cell (id {cid}) is missing from the submission; "
                             "this part of the question scores 0.")
            elif counts[cid] > 1:
                notes.append(f"{qid}: {counts[cid]} copies of the answer cell (id {cid}); the last one was graded.")
    return sources, notes


MISSING_STUB = 'raise NotImplementedError("this answer cell is missing from the submission")\n'
SKIPPED = "# (skipped by the grader: {why})\n"

#: Roles of the instructor's cells that the grader restores from ``solutions/`` (whatever the
#: submission holds in their place) and runs; a check cell becomes the question's export.
INSTRUCTOR = ("setup", "question", "demo", "check")


@dataclass
class GradingNotebook:
    """The notebook the grader runs, and what each of its (code) cells is.

    ``kinds[i]``: ``preamble``, ``setup``, ``question``, ``demo``, ``answer`` (an answer cell of
    the release), ``student`` (a cell the student added), ``export`` (where the check cell was)
    or ``skipped``; ``owners[i]``: the question whose check comes next (a cell's slip, time-out
    or error is that question's), ``None`` after the last; ``labels[i]``: the cell as the
    student knows it ("code cell 7 (`def phi_4(X):`)"); ``exports[qid]``: the export cell's index.
    """

    nb: Any
    owners: list[str | None]
    kinds: list[str]
    labels: list[str]
    exports: dict[str, int]
    #: Names that a demo cell binds and a cell the student wrote reads, by the reading cell's index.
    widget_reads: dict[int, list[str]] = field(default_factory=dict)
    notes: list[str] = field(default_factory=list)


def _instructor_cells(solution: Solution) -> dict[str, tuple[str, str | None, str]]:
    """id -> (role, question, trusted source) of the released instructor cells."""
    out = {}
    for cell in solution.nb.cells:
        m = meta(cell)
        if cell.cell_type == "code" and m.get("role") in INSTRUCTOR:
            out[cell.id] = (m["role"], m.get("question"), cell.source)
    return out


def _label(number: int, src: str) -> str:
    first = next((ln.strip() for ln in src.splitlines() if ln.strip()), "")
    if len(first) > 50:
        first = first[:47] + "..."
    return f"code cell {number}" + (f" (`{first.replace('`', chr(39))}`)" if first else " (empty)")


def grading_notebook(
    solution: Solution, submission: Any, preamble: str, *,
    skip: set[int] | None = None, done: set[str] | None = None,
) -> GradingNotebook:
    """The student's notebook as the grader runs it: every code cell, in the student's order.

    * The instructor's cells (set-up, question, demo, check: found by cell id) run with their
      trusted source from ``solutions/``, whatever the submission holds there; the question
      cells also run first, after the grader's preamble, so that every probe exists.
    * Each question's check cell becomes its export, at the same place: the grader probes the
      answers exactly where the student's check cell ran (a missing check cell: at the end).
    * Answer cells and the cells the student added run as submitted. A demo cell (figures,
      widgets) runs only when a later cell reads a name it binds (found by parsing); else it
      is replaced by a comment.
    * Cells at indexes in ``skip`` (ran out of time or memory in an earlier attempt) and the
      exports of the questions in ``done`` become comments.

    Hostile structure is tolerated: cells that are not objects, sources that are not text
    (a malformed answer cell runs as :data:`MISSING_STUB`).
    """
    skip, done = skip or set(), done or set()
    trusted = _instructor_cells(solution)
    wanted = {cid for ids in solution.answer_cells.values() for cid in ids}
    answer_of = {cid: qid for qid, ids in solution.answer_cells.items() for cid in ids}
    entries: list[tuple[str, str | None, str, str]] = []  # (kind, question, source, label)
    entries.append(("preamble", None, preamble, "the grader's preamble"))
    for role, qid, src in trusted.values():
        if role == "question":
            entries.append(("question", qid, src, f"the question cell of {qid}"))
    placed: set[str] = set()
    number = 0
    cells = submission.get("cells", []) if isinstance(submission, dict) else []
    for cell in cells if isinstance(cells, list) else []:
        if not isinstance(cell, dict) or cell.get("cell_type") != "code":
            continue
        number += 1
        cid, slot = cell.get("id"), meta(cell).get("slot")
        src = _source(cell)
        if isinstance(cid, str) and cid in trusted:
            if cid in placed:
                continue  # a copied instructor cell runs once
            placed.add(cid)
            role, qid, tsrc = trusted[cid]
            kind = "export" if role == "check" else role
            if role == "question":
                continue  # already run first; running it again would change nothing
            entries.append((kind, qid, f"_kpca_export({qid!r})\n" if kind == "export" else tsrc,
                            _label(number, tsrc)))
            continue
        slot_id = cid if isinstance(cid, str) and cid in wanted else (
            slot if isinstance(slot, str) and slot in wanted else None)
        text = MISSING_STUB if src is None else src
        entries.append(("answer" if slot_id else "student", answer_of.get(slot_id or ""), text,
                        _label(number, text)))
    at = 1 + sum(1 for e in entries if e[0] == "question")
    for cid, (role, qid, tsrc) in trusted.items():  # instructor cells the submission lacks
        if cid in placed or role == "question":
            continue
        if role == "check":
            entries.append(("export", qid, f"_kpca_export({qid!r})\n", f"the check cell of {qid}"))
        else:  # set-up and demo cells before everything the student wrote, in their order
            entries.insert(at, (role, None, tsrc, f"the {role} cell {cid}"))
            at += 1
    return _finish(entries, solution, skip, done)


def _finish(entries: list[tuple[str, str | None, str, str]], solution: Solution, skip: set[int],
            done: set[str]) -> GradingNotebook:
    n = len(entries)
    kinds = [e[0] for e in entries]
    # owners: the question whose export comes next
    owners: list[str | None] = [None] * n
    nxt: str | None = None
    exports: dict[str, int] = {}
    for i in range(n - 1, -1, -1):
        kind, qid = entries[i][0], entries[i][1]
        if kind == "export" and qid is not None:
            if qid in exports:  # one export per question: the first check cell counts
                kinds[i] = "skipped"
            nxt = qid
            exports[qid] = i
        owners[i] = nxt
    # demo cells run only when a later cell reads what they bind
    live: set[str] = set()
    opaque = False  # a later cell that cannot be analysed (exec, globals()...) keeps every demo
    demo_binds: dict[int, set[str]] = {}
    for i in range(n - 1, -1, -1):
        kind, src = kinds[i], entries[i][2]
        if kind == "demo":
            bound = binds(src)
            if bound is not None and not opaque and not (bound & live):
                kinds[i] = "unused-demo"
                continue
            demo_binds[i] = bound or set()
        used = reads(src)
        if used is None:
            opaque = True
        else:
            live |= used
    widget_reads = _widget_reads(entries, kinds, set(demo_binds))
    nb = nbformat.v4.new_notebook()
    nb.metadata = {
        "kernelspec": {"name": "python3", "display_name": "Python 3", "language": "python"},
        "language_info": {"name": "python"},
    }
    cells = []
    for i, (kind, qid, src, _) in enumerate(entries):
        if i in skip:
            src, kinds[i] = SKIPPED.format(why="it ran out of time or memory before"), "skipped"
        elif kinds[i] == "unused-demo":
            src = SKIPPED.format(why="a demo cell whose names no later cell reads")
        elif kinds[i] == "skipped":
            src = SKIPPED.format(why="a second copy of a check cell")
        elif kind == "export" and qid in done:
            src = SKIPPED.format(why=f"{qid} is graded already")
        cells.append(nbformat.from_dict({"cell_type": "code", "id": f"g{i:04d}", "metadata": {},
                                         "source": src, "outputs": [], "execution_count": None}))
    nb.cells = cells
    return GradingNotebook(nb, owners, kinds, [e[3] for e in entries], exports, widget_reads)


def _widget_reads(entries: list[tuple[str, str | None, str, str]], kinds: list[str],
                  demos: set[int]) -> dict[int, list[str]]:
    """For each cell the student wrote, the names it reads whose value comes from a demo cell
    (widget or figure): the last cell to bind them before it is a demo that runs, and the cell
    does not bind them itself before reading them (a comprehension's variable, an import or an
    assignment of its own, a name a cell in between redefines are not the widget's)."""
    origin: dict[str, bool] = {}  # name -> bound last by a demo cell?
    out: dict[int, list[str]] = {}
    for i, (_kind, _qid, src, _label) in enumerate(entries):
        if kinds[i] in ("unused-demo", "skipped"):
            continue
        if kinds[i] in ("answer", "student"):
            free = free_reads(src) or frozenset()
            names = sorted(name for name in free if origin.get(name))
            if names:
                out[i] = names
        bound = top_binds(src)
        if bound is None:
            bound = binds(src) or frozenset()
        origin.update(dict.fromkeys(bound, i in demos))
    return out


def release_notebook(solution: Solution) -> Any:
    """The student copy: solutions stubbed, hidden checks removed, question cells read-only and
    folded, outputs cleared, ids kept."""
    nb = copy.deepcopy(solution.nb)
    cells = []
    for cell in nb.cells:
        m = meta(cell)
        role = m.get("role")
        if role in ("hidden-check", "solution-only"):
            continue
        new_meta: dict[str, Any] = {}
        if m:
            keep = {k: v for k, v in m.items() if k in ("role", "question")}
            if role == "answer":
                keep["slot"] = cell.id
            new_meta["kpca"] = keep
        if role in ("check", "question"):
            new_meta["editable"] = False
            new_meta["deletable"] = False
        if role == "question":  # its probe and public checks: public, but folded away
            new_meta["jupyter"] = {"source_hidden": True}
        if "tags" in cell.metadata:
            new_meta["tags"] = list(cell.metadata["tags"])
        cell.metadata = new_meta
        if cell.cell_type == "code":
            cell.outputs = []
            cell.execution_count = None
            if role == "answer":
                cell.source = strip_solutions(cell.source, m.get("stubs"), m.get("question", ""))
        cells.append(cell)
    nb.cells = cells
    nb.metadata = {
        "kernelspec": {"name": "python3", "display_name": "Python 3", "language": "python"},
        "language_info": {"name": "python"},
        "kpca": {"assignment": solution.assignment, "questions": list(solution.questions)},
    }
    nb.nbformat, nb.nbformat_minor = NB_VERSION
    return nb


_REGION = re.compile(
    r"^(?P<indent>[ \t]*)" + re.escape(BEGIN) + r"[^\n]*\n.*?^[ \t]*" + re.escape(END) + r"[^\n]*(\n|$)",
    re.S | re.M,
)


def strip_solutions(source: str, stubs: list[str] | str | None, question: str) -> str:
    """Replace every ``### BEGIN SOLUTION`` … ``### END SOLUTION`` region by a stub."""
    if isinstance(stubs, str):
        stubs = [stubs]
    counter = iter(range(10_000))

    def repl(match: re.Match[str]) -> str:
        k = next(counter)
        indent = match.group("indent")
        if stubs and k < len(stubs):
            body = stubs[k]
            if "YOUR CODE HERE" not in body:
                body = "# YOUR CODE HERE\n" + body
        else:
            body = f'# YOUR CODE HERE\nraise NotImplementedError("{question}: write your code here")'
        return "".join(f"{indent}{line}\n" for line in body.splitlines())

    out, n = _REGION.subn(repl, source)
    if BEGIN in out or END in out:
        raise ValueError(f"{question}: unbalanced {BEGIN} / {END} markers.")
    return out.rstrip("\n")
