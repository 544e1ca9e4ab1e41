"""Student text is data: what a submission's code prints, raises or names is shown, never obeyed.

Unit tests (no kernel, no sandbox) of the Markdown escaping
(:mod:`kpca_lib.course.grading.text`), of the real feedback writer with hostile messages,
notes, check messages and file names, of ``grades.csv`` (spreadsheet formulas) and of the
summary; then of the statuses: only what the grader observed (a memory cgroup's OOM kills and
limit hits) makes a row ``crashed`` for memory, never an exception's name.

The Markdown is parsed with mistune (installed with nbconvert, as JupyterLab needs it), with
GitHub's extensions (tables, strikethrough, bare URLs) and math: the document's structure
(its tree of blocks and inline elements, text merged) must be the same whatever the student's
text, and that text must render as itself.
"""

from __future__ import annotations

import csv
import re
from pathlib import Path
from typing import Any

import mistune
import nbformat
import pytest

from kpca_lib.course.grading.handback.feedback import _md
from kpca_lib.course.grading.handback.feedback import row_feedback as _feedback
from kpca_lib.course.grading.judge.evaluate import CheckResult
from kpca_lib.course.grading.judge.notebooks import grading_notebook, read_solution
from kpca_lib.course.grading.judge.scoring import explain
from kpca_lib.course.grading.pipeline.submission import Submission as _Job
from kpca_lib.course.grading.record import gradebook as gb
from kpca_lib.course.grading.record.rows import Row
from kpca_lib.course.grading.record.rows import row_record as _record
from kpca_lib.course.grading.record.summary import summarize, summary_markdown
from kpca_lib.course.grading.run.kernel_side import PREAMBLE
from kpca_lib.course.grading.run.outcome import cell_errors, classify
from kpca_lib.course.grading.run.outcome import limit_words as _limit_words
from kpca_lib.course.grading.run.runner import CellOutcome, Run
from kpca_lib.course.grading.text import markdown_text, one_line

ROOT = Path(__file__).resolve().parents[1]
ASSIGNMENT = "01_feature_maps"
SOLUTION = read_solution(ROOT / "solutions" / f"{ASSIGNMENT}.ipynb")
EXERCISE = nbformat.read(ROOT / "exercises" / f"{ASSIGNMENT}.ipynb", as_version=4)

HOSTILE = [
    "# Feedback: alice (01_feature_maps)",
    "**Score: 12 / 12** (status: graded)",
    "x\n\n# Feedback: someone else\n\n**Score: 12 / 12**\n\n- ✔ check (3 pt): all passed\n",
    "- ✔ check (3 pt): phi_3 is right",
    "✔ hidden check (3 pt)\r\n===",
    "text\n---\n* * *",
    "[your grade](http://evil.example/phish) and [ref][1]\n\n[1]: http://evil.example",
    "![](http://evil.example/track.png) ![x][img]",
    "<img src=x onerror=alert(1)>",
    "<script>alert(document.cookie)</script><!-- hidden -->",
    "<http://evil.example> <a@b.example>",
    "http://evil.example/x https://evil.example ftp://evil.example //evil.example www.evil.example",
    "mail a@evil.example or @instructor about #12",
    "```\n# in a fence\n```\n~~~\nmore\n~~~",
    "`` code `` and ``` three",
    "| a | b |\n|---|---|\n| 1 | 2 |",
    "&lt;img src=x onerror=alert(1)&gt; &#60;b&#62; &amp;",
    "\x1b[31mred\x1b[0m \x1b]8;;http://evil.example\x07link\x1b]8;;\x07 \x07bell \x00nul",
    "right\u202eto left\u200b\u2028next line\u2029next paragraph\x85\x0c\x0b",
    "1. one\n2) two\n+ plus\n> quoted\n    indented code",
    "$\\href{http://evil.example}{click}$ $$x$$",
    "[^1] and\n\n[^1]: http://evil.example",
    "*em* _em_ __strong__ ~~gone~~ ~one~",
    "a trailing backslash\\",
    "\\# an escape made already, \\\\ two, \\[x\\](y)",
    "  \t leading and trailing spaces  \n",
    "{: .class} {#id}",
]

ESCAPED = "\\`*_{}[]<>#|~!$&@:/.-+=)"
PLUGINS = ["strikethrough", "table", "url", "math", "footnotes"]
AST = mistune.create_markdown(renderer=None, plugins=PLUGINS)
HTML = mistune.create_markdown(escape=False, plugins=PLUGINS)  # raw HTML kept, as Jupyter does


def literal(text: str) -> str:
    """What ``markdown_text(text)`` renders as: the text on one line (a backslash written before
    a character the escaping uses is the one thing lost)."""
    return re.sub(r"\\([" + re.escape(ESCAPED) + "])", r"\1", one_line(text))


def shape(tokens: list[dict[str, Any]]) -> list[Any]:
    """A token tree without its text: consecutive text tokens as one ``"text"``."""
    out: list[Any] = []
    for t in tokens:
        if t["type"] == "text":
            if not out or out[-1] != "text":
                out.append("text")
            continue
        if t["type"] == "blank_line":
            continue
        attrs = {k: v for k, v in (t.get("attrs") or {}).items() if k not in ("url", "title")}
        out.append((t["type"], tuple(sorted(attrs.items())), tuple(shape(t.get("children") or []))))
    return out


def texts(tokens: list[dict[str, Any]]) -> str:
    return "".join(t.get("raw", "") if t["type"] == "text" else texts(t.get("children") or [])
                   for t in tokens)


def types(tokens: list[dict[str, Any]]) -> set[str]:
    return {t["type"] for t in tokens} | {x for t in tokens for x in types(t.get("children") or [])}


# --------------------------------------------------------------------------- the escaping
CONTEXTS = {  # where the grader puts a student's text, with {} for it
    "paragraph": "The grader says: {} (end).",
    "quote": "> {}",
    "continuation": "- ✘ check (1 pt): a description  \n  {}",
    "heading": "## Feedback: {} (01_feature_maps)",
    "table": "| a | b |\n|---|---|\n| {} | 2 |",
}


@pytest.mark.parametrize("hostile", HOSTILE)
def test_student_text_is_one_literal_line_in_every_context(hostile):
    shown = markdown_text(hostile)
    assert "\n" not in shown and "\r" not in shown and shown == shown.strip()
    assert all(ch.isprintable() for ch in shown), repr(shown)
    assert markdown_text(shown) == shown  # escaping twice changes nothing
    assert markdown_text(hostile, identifiers=True) == markdown_text(
        markdown_text(hostile, identifiers=True), identifiers=True)
    for where, template in CONTEXTS.items():
        tree = AST(template.format(shown))
        assert shape(tree) == shape(AST(template.format("plain words"))), (where, shown, tree)
        assert literal(hostile) in texts(tree), (where, texts(tree))
        html = HTML(template.format(shown))
        for tag in ("<a", "<img", "<script", "<!--", "<code", "<pre", "<del", "<em", "<strong",
                    "<hr", "<ol", "<h1", "<h3", "math", "footnote"):
            assert tag not in html or tag in HTML(template.format("plain words")), (where, tag, html)


def test_the_grader_words_read_as_they_are():
    """Common messages render exactly as written, and stay readable in the file."""
    for message in [
        "phi_4(x)ᵀphi_4(y) is not (xᵀy + 1)^4: for p = 4 your map has 10 features, fewer than "
        "the monomials of degree ≤ 4 in x₁, x₂.",
        "counterexamples['f']: on your 2 points the kernel matrix of cos(x₁ − y₁) is symmetric",
        "answer_sigma = 20 is outside the slider's range [0.02, 10.0]: paste the line shown.",
        "kernel_cheaper(29, 3, 4959) is the string 'True', not the boolean True",
        "code cell 3 (`offset = undefined_helper(1)`) raised NameError: name 'undefined_helper' "
        "is not defined",
    ]:
        shown = _md(message)
        assert texts(AST(shown)) == message
        assert shown.replace("\\", "") == message  # only backslashes were added
    assert markdown_text("phi_poly(X, 3) and q1_phi_general", identifiers=True) == (
        "phi_poly(X, 3) and q1_phi_general")
    assert markdown_text("_private_ x", identifiers=True) == "\\_private\\_ x"
    assert one_line("a\x1b[1;31mb\x1b[0m\tc\r\n d\x00") == "ab c d<U+0000>"


# --------------------------------------------------------------------------- the feedback
def _row(text: str) -> Row:
    """A row whose every student-derived text is ``text``: name, messages, notes, messages
    of failed checks (and a passed check, whose message is not shown)."""
    q1, q2 = SOLUTION.questions[0], SOLUTION.questions[-1]
    checks = [
        CheckResult(f"{q1}.a", q1, "phi_3 is exact for p = 3", 1.0, False, text, False),
        CheckResult(f"{q1}.b", q1, "counts past 2**53", 1.0, False, f"the answer could not be "
                    f"checked (ValueError: {text})", True),
        CheckResult(f"{q2}.a", q2, "n_features(d, p)", 1.5, True, text, False),
    ]
    return Row(
        submission=text, file="x.ipynb", status="graded", max_score=SOLUTION.max_score,
        questions={q: 0.0 for q in SOLUTION.questions}, checks=checks,
        messages=[text, f"{q1}: code cell 3 (`{text}`) stopped: it ran out of memory"],
        notes={q1: [f"code cell 4 raised ValueError: {text}", text], q2: [text]})


def test_feedback_structure_does_not_depend_on_student_text():
    """The real writer, every student-derived text hostile: the same document tree as with
    plain words, one H1, one score, one H2 per question, no link, image, HTML or code."""
    plain = _feedback(_row("plain words"), SOLUTION)
    reference = shape(AST(plain))
    n = len(SOLUTION.questions)
    for hostile in HOSTILE:
        text = _feedback(_row(hostile), SOLUTION)
        tree = AST(text)
        assert shape(tree) == reference, hostile
        assert len(text.splitlines()) == len(plain.splitlines())
        assert not types(tree) & {"link", "image", "inline_html", "block_html", "codespan",
                                  "block_code", "thematic_break", "table", "strikethrough",
                                  "emphasis", "inline_math", "block_math", "footnote_ref"}
        headings = [t for t in tree if t["type"] == "heading"]
        assert [h["attrs"]["level"] for h in headings] == [1] + [2] * n
        assert texts([headings[0]]) == f"Feedback: {literal(hostile)} ({ASSIGNMENT})"
        assert text.count("**Score: ") == 1 and types(tree) >= {"strong"}
        assert sum(1 for line in text.splitlines() if line.startswith(("- ✔", "- ✘"))) == 3
        assert literal(hostile) in texts(tree)
        html = HTML(text)
        assert "<a " not in html and "<img" not in html and "<script" not in html
        assert html.count("<h1>") == 1 and html.count("<strong>") == 1


def test_instructor_text_is_escaped_but_readable():
    text = _feedback(_row("plain words"), SOLUTION)
    assert f"# Feedback: plain words ({ASSIGNMENT})" in text
    assert "counts past 2\\*\\*53" in text  # no bold from a description
    assert f"## {SOLUTION.questions[0]}: " in text  # identifiers keep their underscores


# --------------------------------------------------------------------------- grades.csv
FORMULAS = ["=1+2", "+1", "-1", "@SUM(A1:A2)", "\t=1", "\r=1", "=HYPERLINK(\"http://evil\",\"x\")",
            "=cmd|' /C calc'!A0"]


def test_every_csv_cell_is_inert(tmp_path):
    points = {"=q1": 3.0, "q2": 3.0}
    out = tmp_path / "out"
    with gb.Gradebook(out, assignment=ASSIGNMENT, points=points, mode="new") as book:
        book.start(tmp_path, "bwrap")
        for i, name in enumerate(["alice", *FORMULAS]):
            row = Row(name, f"{i}.ipynb", status="graded", max_score=6.0,
                      questions={"=q1": 3.0, "q2": 0.0}, messages=[f"=1+{i}"])
            book.add(_record(row), "feedback")
    with open(out / "grades.csv", newline="", encoding="utf-8") as fh:
        table = list(csv.reader(fh))
    assert table[0] == ["submission", "status", "score", "max_score", "'=q1", "q2", "run_seconds",
                        *gb.CSV_EXTRA]
    cells = [c for r in table for c in r]
    assert not [c for c in cells if c[:1] in ("=", "+", "-", "@", "\t", "\r", "\n")], cells
    names = [r[0] for r in table[1:]]
    assert names == ["alice", *("'" + f for f in FORMULAS)]  # shown in full, prefixed
    assert not [c for c in cells if "=1+1" in c]  # messages are not in the CSV at all


# --------------------------------------------------------------------------- the summary
def test_summary_shows_gradebook_text_as_data():
    hostile = "x <img src=x onerror=1> ![](http://evil/i.png) [l](http://e) | \x1b[31m\n# H"
    q = SOLUTION.questions[0]
    rows = [{"submission": "a", "status": "graded", "score": 0.0, "max_score": 12.0,
             "questions": {q: 0.0}, "run_seconds": 1.0,
             "checks": [{"id": f"{q}.{hostile}", "question": q, "description": hostile,
                         "points": 1.0, "passed": False, "message": hostile, "hidden": False}]},
            {"submission": "b", "status": "<script>x</script>", "score": 0.0, "max_score": 12.0,
             "questions": {q: 0.0}, "checks": []}]
    s = summarize(rows, {q: 3.0}, assignment="01_feature_maps [x](http://e)")
    for text in (summary_markdown(s), summary_markdown(s, compact=True)):
        assert "\x1b" not in text
        tree = AST(text)
        assert not types(tree) & {"link", "image", "inline_html", "block_html"}, text
        html = HTML(text)
        assert "<img" not in html and "<script" not in html and "<a " not in html
        # Scores, Questions, Most-failed checks, Run time, Problems (row b's status, escaped)
        assert [t["attrs"]["level"] for t in tree if t["type"] == "heading"] == [1, 2, 2, 2, 2, 2]
        assert "- b (\\<script\\>x\\</script\\>)" in text
        tables = [t for t in tree if t["type"] == "table"]
        widths = {len(r["children"]) for t in tables for part in t["children"]
                  for r in ([part] if part["type"] == "table_head" else part["children"])}
        assert widths == {3, 5, 6}  # histogram, questions, checks: no cell split by a '|'
        assert "# Summary: 01_feature_maps \\[x\\](http\\:\\//e)" in text


# --------------------------------------------------------------------------- statuses
def _job(memory_mb: int = 1024) -> _Job:
    row = Row("s", "s.ipynb", max_score=SOLUTION.max_score,
              questions={q: 0.0 for q in SOLUTION.questions})
    built = grading_notebook(SOLUTION, EXERCISE, PREAMBLE)
    job = _Job(row, SOLUTION, EXERCISE, {}, Path("/nonexistent"), b"k" * 32, built=built)
    MEMORY[id(job)] = memory_mb
    return job


MEMORY: dict[int, int] = {}  # the --memory each _job was made for


def _classify(run: Run, owners: Any = None) -> tuple[str, int | None, str]:
    return classify(run)


def _cell_errors(job: _Job, run: Run) -> None:
    for cell, error in cell_errors(run, job.built).items():
        job.errors.setdefault(cell, error)


def _explain(job: _Job) -> None:
    notes, messages = explain(job.built, job.errors, job.skip, MEMORY[id(job)])
    for qid, lines in notes.items():
        job.row.notes.setdefault(qid, []).extend(lines)
    job.row.messages.extend(messages)


def _answer_cell(job: _Job, qid: str) -> int:
    assert job.built is not None
    return next(i for i, (k, o) in enumerate(zip(job.built.kinds, job.built.owners, strict=True))
                if k == "answer" and o == qid)


def _run(job: _Job, cell: int, alive: bool | None = True, **facts: Any) -> Run:
    assert job.built is not None
    run = Run(Path("/nonexistent/submission.ipynb"), n_cells=len(job.built.kinds), finished=True)
    base = {"oom_kills": 0, "memory_hits": 0, "pids_refused": 0, "killed": None,
            "nbval_timeout": False, "ename": None, "evalue": None}
    for i in range(len(job.built.kinds)):
        run.cells[i] = CellOutcome(i, "passed", True, "")
    run.cells[cell] = CellOutcome(cell, "failed", alive, "MemoryError", {**base, **facts})
    return run


@pytest.mark.parametrize("ename", ["MemoryError", "_ArrayMemoryError"])
def test_a_memory_error_that_no_limit_saw_is_an_exception_not_a_crash(ename):
    """``raise MemoryError`` (or the per-process address-space limit, without a memory cgroup:
    the grader cannot tell them apart) leaves the row graded; the question's note shows the
    exception and says what the limit is, as a possibility."""
    job = _job(memory_mb=1024)
    qid = SOLUTION.questions[1]
    cell = _answer_cell(job, qid)
    run = _run(job, cell, ename=ename, evalue="x\n# Score: 12 / 12")
    assert _classify(run, job.built.owners) == ("graded", None, "")
    _cell_errors(job, run)
    _explain(job)
    note = " ".join(job.row.notes[qid])
    assert f"raised {ename}: x\n# Score: 12 / 12" in note
    assert (f"If this {ename} came from the grader's memory limit rather than from your code, "
            "that limit is 1024 MB") in note
    text = _feedback(job.row, SOLUTION)
    assert "> code cell" in text and "\\# Score: 12 / 12" in text and "\n# Score" not in text


def test_other_exceptions_get_no_memory_hint_and_exports_say_where():
    job = _job()
    q1, q2 = SOLUTION.questions[0], SOLUTION.questions[1]
    run = _run(job, _answer_cell(job, q1), ename="ValueError", evalue="bad")
    export = job.built.exports[q2]
    run.cells[export] = CellOutcome(export, "failed", True, "", {"ename": "MemoryError", "evalue": ""})
    assert _classify(run, job.built.owners)[0] == "graded"
    _cell_errors(job, run)
    _explain(job)
    assert "raised ValueError: bad" in job.row.notes[q1][0] and "memory" not in job.row.notes[q1][0]
    assert f"where the grader checks {q2}, raised MemoryError." in job.row.notes[q2][0]
    assert "that limit is" in job.row.notes[q2][0]


@pytest.mark.parametrize("facts, alive", [
    ({"oom_kills": 1}, True),  # the cgroup's OOM killer: a process of the kernel's was killed
    ({"oom_kills": 1, "ename": "ValueError"}, False),
    ({"memory_hits": 3}, False),  # the limit was reached and the kernel died
    ({"memory_hits": 3, "ename": "MemoryError"}, True),  # the limit was reached, and it raised
])
def test_observed_memory_limits_crash_the_row(facts, alive):
    job = _job(memory_mb=512)
    cell = _answer_cell(job, SOLUTION.questions[2])
    status, at, message = _classify(_run(job, cell, alive, **facts), job.built.owners)
    assert (status, at) == ("crashed", cell) and "out of memory" in message
    assert "memory limit of 512 MB" in _limit_words(message, 30.0, MEMORY[id(job)])


def test_memory_limit_hits_alone_do_not_crash_a_cell_that_raised_something_else():
    job = _job()
    cell = _answer_cell(job, SOLUTION.questions[2])
    run = _run(job, cell, True, memory_hits=2, ename="ValueError", evalue="x")
    assert _classify(run, job.built.owners) == ("graded", None, "")


def test_a_kernel_that_never_started_is_run_again_and_charges_nothing():
    """No cell of the student's ran: the attempt is repeated as it was (a transient failure of
    the machine), up to MAX_RESUMES; only then is the stop recorded as before."""
    from kpca_lib.course.grading.config import GradeConfig
    from kpca_lib.course.grading.pipeline.submission import MAX_RESUMES, after_run

    config = GradeConfig(assignment=SOLUTION.assignment, solutions=ROOT / "solutions",
                         out=Path("grades"))
    job = _job()
    job.attempts = 1
    run = _run(job, 0, alive=None)
    assert classify(run) == ("crashed", 0, "the kernel did not start")
    after_run(job, run, config)
    assert job.resume and not job.skip and not job.zeroed and not job.failures
    assert job.row.status == "graded" and job.row.messages == []
    job.attempts, job.resume = MAX_RESUMES, False
    after_run(job, _run(job, 0, alive=None), config)  # the last attempt: recorded as a stop
    assert job.row.status == "crashed" and "the kernel did not start" in " ".join(job.row.messages)
