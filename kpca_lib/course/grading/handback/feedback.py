"""A student's feedback: Markdown, a self-contained HTML page, and the hand-back tree.

Both documents are built from one gradebook row (an entry of ``grades.json``, as
:func:`~kpca_lib.course.grading.record.rows.row_record` writes it) and, once the instructor's policy
applies, its :class:`~kpca_lib.course.grading.record.policy.Final` grade. Their content and order
are the same: the score, how it was computed (with a ``Final``), the run's messages, then
one part per question with its notes and checks.

Text is of three origins, and each is shown as data:

* the grader's own words (fixed sentences, numbers);
* the instructor's (the assignment, question ids and titles, check descriptions, the
  reason of an adjustment): escaped, one line; in HTML, ``$...$`` in an assignment, a title
  or a description is drawn as MathML (:func:`tex_mathml`), without any script;
* the student's (messages, notes, check messages, the row id, anything from their code):
  escaped, one line, control and format characters shown as ``<U+XXXX>``
  (:func:`~kpca_lib.course.grading.text.one_line`).

The HTML page needs nothing but itself: inline CSS, no script, no URL of any kind, and a
Content-Security-Policy that forbids loading anything. :func:`student_paths` names each
row's files in a tree that any operating system can unpack, and :func:`zip_folder` packs
such a tree reproducibly.
"""

from __future__ import annotations

import hashlib
import html
import io
import itertools
import re
import unicodedata
import zipfile
from collections.abc import Iterable, Mapping
from typing import Any

from ..judge.notebooks import Solution
from ..record.gradebook import format_points
from ..record.policy import Final, format_time
from ..record.roster import student_of
from ..record.rows import Row, row_record
from ..text import markdown_text, one_line

__all__ = ["feedback_markdown", "feedback_html", "row_feedback", "record_feedback", "crash_feedback",
           "tex_mathml", "student_paths", "zip_folder",
           "MAX_NAME_CHARS"]

#: The grader's words (``"g"``), the student's (``"s"``), the instructor's plain text that may
#: hold math (``"i"``) and an adjustment's reason (``"r"``): a line is a tuple of such parts.
Part = tuple[str, str]

HIDDEN_NOTE = ("Hidden checks are named by what they test and say what failed; their code and "
               "inputs stay with the grader.")


def _fp(x: Any) -> str:
    return format_points(float(x))


# --------------------------------------------------------------------------- the row's facts
def _checks(record: Mapping[str, Any], qid: str) -> list[Mapping[str, Any]]:
    return [c for c in record.get("checks", []) if c.get("question") == qid]


def _public_line(record: Mapping[str, Any], qid: str, points: Mapping[str, float]) -> str:
    public = sum(float(c["points"]) for c in _checks(record, qid) if not c.get("hidden"))
    return (f"Public checks (the ones in your notebook, on the grader's inputs): "
            f"{_fp(public)} of {_fp(points[qid])} points; the rest are hidden checks.")


def _by_hand(final: Final, qid: str) -> bool:
    """Whether an adjustment gave ``qid`` its score (``score``, not points added)."""
    return any(a.question == qid and a.score is not None for a in final.applied)


def _question_points(record: Mapping[str, Any], qid: str, points: Mapping[str, float],
                     final: Final | None) -> tuple[str, str]:
    """What a question's heading says of its points (``3 / 3``), and what a ``Final``
    changed from the automatic points (``automatic: 2``, or ``""``)."""
    top = _fp(points[qid])
    if final is None:
        return f"{_fp(record['questions'].get(qid, 0))} / {top}", ""
    if qid in final.pending:
        return f"not graded yet; {top} points", ""
    got = final.questions.get(qid, 0.0)
    if _by_hand(final, qid):
        return f"{_fp(got)} / {top}, graded by hand", ""
    auto = final.auto.get(qid, 0.0)
    return f"{_fp(got)} / {top}", ("" if got == auto else f"automatic: {_fp(auto)}")


def _regraded(record: Mapping[str, Any], qid: str) -> list[list[Part]]:
    out = []
    for r in record.get("regraded") or []:
        if isinstance(r, Mapping) and r.get("question") == qid:
            before = r.get("before")
            was = f": before, the checks gave {_fp(before)} points" if before is not None else ""
            out.append([("g", "Regraded on "), ("s", str(r.get("at", ""))), ("g", was + ".")])
    return out


def _late_lines(final: Final) -> list[list[Part]]:
    late = final.late
    if late is None:
        return []
    due = ("s", format_time(late.due))
    if late.submitted is None and late.marked:
        if not late.late:
            return [[("g", "Submitted on time (by the course platform's own record); due "), due,
                     ("g", ".")]]
        return [[("g", "Submitted late (by the course platform's own record, which gives no "
                       "time); due "), due,
                 ("g", f"; counted as 1 day late, {late.percent:g}% off: "
                       f"{_fp(-final.penalty)} points.")]]
    if late.submitted is None:
        return [[("g", "Late work: the grader does not know when you handed this in, so no "
                       "late penalty was applied; due "), due, ("g", ".")]]
    sub = ("s", format_time(late.submitted))
    if not late.late:
        grace = " (within the grace period)" if late.submitted > late.due else ""
        return [[("g", "Submitted on time"), ("g", grace), ("g", ": "), sub, ("g", ", due "), due,
                 ("g", ".")]]
    days = f"{late.days} day{'s' if late.days != 1 else ''} late"
    return [[("g", "Submitted late: "), sub, ("g", ", due "), due,
             ("g", f"; {days}, {late.percent:g}% off: {_fp(-final.penalty)} points.")]]


def _computation(final: Final, points: Mapping[str, float]) -> list[list[Part]]:
    """The lines of "How your score was computed" (``final.warnings`` are the instructor's)."""
    lines: list[list[Part]] = [
        [("g", f"Automatic score (the checks): {_fp(final.auto_score)} / "
               f"{_fp(final.max_score)}.")]]
    for a in final.applied:
        where: Part = ("i", a.question) if a.question else ("g", "the whole submission")
        how = " (graded by hand)" if a.question and a.score is not None else ""
        lines.append([("g", "Adjustment to "), where, ("g", f": {a.describe()}{how} — "),
                      ("r", a.reason)])
    for qid in final.pending:
        lines.append([("i", qid), ("g", f" is graded by hand: not graded yet (it counts 0 of "
                                        f"{_fp(points[qid])} until it is).")])
    lines += _late_lines(final)
    lines.append([("g", f"Final score: {_fp(final.score)} / {_fp(final.max_score)}.")])
    return lines


# --------------------------------------------------------------------------- Markdown
def _md(text: str) -> str:
    return markdown_text(text)


def _md_trusted(text: str) -> str:
    return markdown_text(text, identifiers=True)


def _md_line(parts: list[Part]) -> str:
    render = {"g": str, "s": _md, "r": _md, "i": _md_trusted}
    return "".join(render[kind](text) for kind, text in parts)


def feedback_markdown(record: Mapping[str, Any], *, assignment: str,
                      points: Mapping[str, float], titles: Mapping[str, str],
                      final: Final | None = None) -> str:
    """A row's feedback as Markdown (``feedback/<name>.md``).

    Parameters
    ----------
    record : Mapping
        The gradebook row (an entry of ``grades.json``).
    assignment : str
        The assignment's name.
    points : Mapping[str, float]
        Each question's points, in the assignment's order.
    titles : Mapping[str, str]
        Each question's title.
    final : Final, optional
        The row's final grade (:func:`~kpca_lib.course.grading.record.policy.finalize`): the score
        shown is then the final one, explained in a part of its own. Without it the
        automatic score is shown, as the grader writes it.

    Returns
    -------
    str
        The document; every text but the grader's own words is escaped
        (:func:`~kpca_lib.course.grading.text.markdown_text`), so no student text makes a
        heading, link, image, HTML or a line of its own.
    """
    score, top = ((final.score, final.max_score) if final is not None
                  else (record["score"], record["max_score"]))
    lines = [f"# Feedback: {_md(str(record['submission']))} ({_md_trusted(assignment)})", "",
             f"**Score: {_fp(score)} / {_fp(top)}** (status: {_md(str(record['status']))})", ""]
    if final is not None:
        lines += ["## How your score was computed", ""]
        lines += [f"- {_md_line(parts)}" for parts in _computation(final, points)] + [""]
    messages = record.get("messages", [])
    lines += [f"> {_md(m)}" for m in messages] + ([""] if messages else [])
    notes = record.get("notes") or {}
    for qid in points:
        got, auto = _question_points(record, qid, points, final)
        lines += [f"## {_md_trusted(qid)}: {_md_trusted(titles.get(qid, qid))} ({got})"
                  + (f" ({auto})" if auto else ""), ""]
        lines += [_md_line(parts) + "\n" for parts in _regraded(record, qid)]
        for text in notes.get(qid, []):
            lines += [f"> {_md(text)}", ""]
        lines += [_public_line(record, qid, points), ""]
        for c in _checks(record, qid):
            mark, kind = "✔" if c["passed"] else "✘", "hidden check" if c.get("hidden") else "check"
            text = f"- {mark} {kind} ({_fp(c['points'])} pt): {_md_trusted(c['description'])}"
            lines.append(text if c["passed"] else f"{text}  \n  {_md(c['message'])}")
        lines.append("")
    lines.append(HIDDEN_NOTE)
    return "\n".join(lines) + "\n"


# --------------------------------------------------------------------------- TeX → MathML
_GREEK = dict(zip(
    "alpha beta gamma delta epsilon zeta eta theta iota kappa lambda mu nu xi pi rho sigma tau "
    "upsilon phi chi psi omega varepsilon varphi Gamma Delta Theta Lambda Xi Pi Sigma Phi Psi "
    "Omega".split(), "αβγδϵζηθικλμνξπρστυϕχψωεφΓΔΘΛΞΠΣΦΨΩ", strict=True))
_SYMBOLS = {"top": ("mi", "⊤"), "infty": ("mi", "∞"), "cdot": ("mo", "⋅"), "times": ("mo", "×"),
            "le": ("mo", "≤"), "leq": ("mo", "≤"), "ge": ("mo", "≥"), "geq": ("mo", "≥"),
            "ne": ("mo", "≠"), "neq": ("mo", "≠"), "approx": ("mo", "≈"), "in": ("mo", "∈"),
            "to": ("mo", "→"), "sum": ("mo", "∑"), "ldots": ("mi", "…"), "|": ("mo", "‖"),
            "{": ("mo", "{"), "}": ("mo", "}"), ",": ("mspace", ""), " ": ("mspace", "")}
_OPERATORS = set("+-=<>()[],.;:|/!'*") | set("−≤≥≠⋅×→∈")
_FENCES = set("()[]{}|‖")
_TEX_TOKEN = re.compile(r"\\[A-Za-z]+|\\.|\d+(?:\.\d+)?|\s+|.", re.S)
_MATH = re.compile(r"(?<![\\$])\$(?=[^\s$])([^$]*?[^\s\\$])\$(?![\d$])")
MAX_TEX = 400


def row_feedback(row: Row, solution: Solution) -> str:
    """``feedback/<name>.md``: the row's automatic feedback (:func:`feedback_markdown` of its
    record)."""
    return record_feedback(row_record(row), solution)


def record_feedback(record: Mapping[str, Any], solution: Solution) -> str:
    """:func:`feedback_markdown` of a gradebook record, with the solution's points and titles."""
    return feedback_markdown(record, assignment=solution.assignment, points=solution.points,
                             titles={q: solution.question(q).title for q in solution.questions})


def crash_feedback(row: Row, assignment: str) -> str:
    """The feedback of a row whose feedback could not be written: its status and messages."""
    return (f"# Feedback: {_md(row.submission)} ({assignment})\n\n"
            f"Status: crashed. {_md(' '.join(row.messages))}\n")


class _NotTex(ValueError):
    """Beyond the small TeX that :func:`tex_mathml` knows."""


def _leaf(tag: str, text: str) -> str:
    if tag == "mspace":
        return '<mspace width="0.2em"></mspace>'
    if tag == "mo" and text in _FENCES:  # as tall as the text, as TeX draws a plain (
        return f'<mo stretchy="false">{html.escape(text)}</mo>'
    return f"<{tag}>{html.escape(text)}</{tag}>"


def _group(tokens: list[str], i: int) -> tuple[str, int]:
    """``{...}`` or one token at ``tokens[i]`` (an argument of ``^``, ``_``, ``\\frac``)."""
    if i >= len(tokens) or tokens[i] in ("^", "_", "}"):
        raise _NotTex
    if tokens[i] != "{":
        return _atom(tokens, i)
    inner, j = _row(tokens, i + 1)
    if j >= len(tokens) or tokens[j] != "}":
        raise _NotTex
    return inner, j + 1


def _atom(tokens: list[str], i: int) -> tuple[str, int]:
    t = tokens[i]
    if t == "{":
        return _group(tokens, i)
    if t == "\\frac":
        num, i = _group(tokens, i + 1)
        den, i = _group(tokens, i)
        return f"<mfrac>{num}{den}</mfrac>", i
    if t == "\\sqrt":
        arg, i = _group(tokens, i + 1)
        return f"<msqrt>{arg}</msqrt>", i
    if t.startswith("\\"):
        name = t[1:]
        if name in _GREEK:
            return _leaf("mi", _GREEK[name]), i + 1
        if name in _SYMBOLS:
            return _leaf(*_SYMBOLS[name]), i + 1
        raise _NotTex
    if t[0].isdigit():
        return _leaf("mn", t), i + 1
    if t.isalpha():
        return _leaf("mi", t), i + 1
    if t in _OPERATORS:
        return _leaf("mo", "−" if t == "-" else t), i + 1
    raise _NotTex


def _row(tokens: list[str], i: int) -> tuple[str, int]:
    """An ``<mrow>`` of atoms with their scripts, up to a ``}`` or the end."""
    parts = []
    while i < len(tokens) and tokens[i] != "}":
        base, i = _atom(tokens, i)
        scripts: dict[str, str] = {}
        while i < len(tokens) and tokens[i] in ("^", "_"):
            if tokens[i] in scripts:
                raise _NotTex  # x^a^b
            scripts[tokens[i]], i = _group(tokens, i + 1)
        if "^" in scripts and "_" in scripts:
            base = f"<msubsup>{base}{scripts['_']}{scripts['^']}</msubsup>"
        elif scripts:
            tag = "msup" if "^" in scripts else "msub"
            base = f"<{tag}>{base}{next(iter(scripts.values()))}</{tag}>"
        parts.append(base)
    return f"<mrow>{''.join(parts)}</mrow>", i


def tex_mathml(tex: str) -> str | None:
    """A small piece of TeX as inline MathML, or ``None`` when it is beyond what is known.

    Known: letters, numbers, operators, Greek letters (``\\sigma``), ``\\top`` and a few
    symbols (``\\le``, ``\\cdot``, ``\\infty``...), ``^`` and ``_`` with one token or a
    ``{...}`` group, ``\\frac{a}{b}`` and ``\\sqrt{x}``. Every text is HTML-escaped.
    """
    tokens = [t for t in _TEX_TOKEN.findall(tex) if not t.isspace()]
    if not tokens or len(tex) > MAX_TEX:
        return None
    try:
        body, end = _row(tokens, 0)
    except (_NotTex, RecursionError):
        return None
    return None if end != len(tokens) else f'<math display="inline">{body}</math>'


def _html_math(text: str) -> str:
    """Instructor text, escaped, with ``$...$`` as MathML (else as ``<code>``)."""
    out, at = [], 0
    for m in _MATH.finditer(text):
        tex = m.group(1)
        out.append(html.escape(text[at:m.start()]))
        out.append(tex_mathml(tex) or f"<code>{html.escape(tex)}</code>")
        at = m.end()
    return "".join(out) + html.escape(text[at:])


# --------------------------------------------------------------------------- HTML
CSS = """
:root{color-scheme:light;--ink:#1f2328;--muted:#59636e;--line:#d1d9e0;--page:#f4f6f8;
--ok:#1a7f37;--ok-bg:#e6f4ea;--bad:#c62828;--bad-bg:#fdecea;--note:#9a6700;--note-bg:#fff8e1;
--info:#0b57d0;--info-bg:#e8f0fe}
*{box-sizing:border-box}
html{-webkit-text-size-adjust:100%;text-size-adjust:100%}
body{margin:0;background:var(--page);color:var(--ink);
font:16px/1.55 "DejaVu Sans","Noto Sans","Segoe UI","Segoe UI Symbol",system-ui,sans-serif}
main{max-width:56rem;margin:0 auto;padding:1.5rem 1rem 3rem}
header,section{background:#fff;border:1px solid var(--line);border-radius:10px;
padding:1.1rem 1.4rem;margin:0 0 1rem}
h1{font-size:1.35rem;margin:0 0 .2rem;overflow-wrap:anywhere}
h2{font-size:1.1rem;margin:0 0 .6rem;display:flex;flex-wrap:wrap;gap:.3rem .6rem;
align-items:baseline}
h2 .pts{margin-left:auto;white-space:nowrap;color:var(--muted);font-weight:600}
h2 .auto{font-weight:400;font-size:.9em}
.kicker{margin:0;color:var(--muted);font-size:.9rem}
.score{display:flex;flex-wrap:wrap;align-items:baseline;gap:.4rem 1rem;margin-top:.6rem}
.score strong{font-size:2.6rem;line-height:1.1}
.score .of{font-size:1.4rem;color:var(--muted)}
.status{border-radius:999px;padding:.1rem .7rem;font-size:.9rem;font-weight:600;
background:var(--info-bg);color:var(--info)}
.status.graded{background:var(--ok-bg);color:var(--ok)}
code,.id{font-family:"DejaVu Sans Mono",ui-monospace,Menlo,Consolas,monospace;font-size:.92em}
.id{color:var(--muted)}
math{font-family:"DejaVu Serif","STIX Two Math","Latin Modern Math",math,serif}
.callout{border-left:4px solid var(--info);background:var(--info-bg);border-radius:6px;
padding:.55rem .9rem;margin:.6rem 0;overflow-wrap:anywhere}
.callout.note{border-color:var(--note);background:var(--note-bg)}
.public{color:var(--muted);font-size:.92rem;margin:.4rem 0}
ul{padding-left:1.2rem}
ul.checks{list-style:none;padding:0;margin:.4rem 0 0}
.checks li{border-top:1px solid var(--line);padding:.55rem 0}
.checks li:first-child{border-top:0}
.verdict{display:inline-flex;align-items:center;gap:.3rem;font-weight:700;min-width:5.4rem}
.pass .verdict{color:var(--ok)}
.fail .verdict{color:var(--bad)}
.mark{font-size:1.15em}
.tag{font-size:.8rem;border:1px solid var(--line);border-radius:4px;padding:0 .35rem;
color:var(--muted);white-space:nowrap}
.tag.hidden{border-style:dashed}
.fail .why{border-left:4px solid var(--bad);background:var(--bad-bg);border-radius:6px;
padding:.45rem .8rem;margin:.4rem 0 0;overflow-wrap:anywhere}
footer{color:var(--muted);font-size:.9rem;padding:0 .3rem}
@media (max-width:600px){body{font-size:15px}main{padding:.6rem .5rem 2rem}
header,section{padding:.8rem .9rem}.score strong{font-size:2.1rem}h2 .pts{margin-left:0}}
"""
CSP = "default-src 'none'; style-src 'unsafe-inline'"


def _text(text: Any) -> str:
    """Any untrusted text: one line of visible characters, HTML-escaped."""
    return html.escape(one_line(str(text)))


def _html_line(parts: list[Part]) -> str:
    render = {"g": html.escape, "s": _text, "r": _text, "i": lambda t: _html_math(one_line(t))}
    return "".join(render[kind](text) for kind, text in parts)


def _html_check(c: Mapping[str, Any]) -> str:
    ok = bool(c["passed"])
    verdict = ('<span class="mark" aria-hidden="true">✔</span> passed' if ok
               else '<span class="mark" aria-hidden="true">✘</span> failed')
    tag = ('<span class="tag hidden">hidden check</span>' if c.get("hidden")
           else '<span class="tag">public check</span>')
    item = (f'<li class="{"pass" if ok else "fail"}"><span class="verdict">{verdict}</span> '
            f'{tag} <span class="pt">({_fp(c["points"])} pt)</span> '
            f'{_html_math(one_line(str(c["description"])))}')
    return item + ("" if ok else f'<div class="why">{_text(c["message"])}</div>') + "</li>"


def _html_question(record: Mapping[str, Any], qid: str, points: Mapping[str, float],
                   title: str, final: Final | None) -> list[str]:
    got, auto = _question_points(record, qid, points, final)
    auto_html = f' <span class="auto">({html.escape(auto)})</span>' if auto else ""
    out = ["<section>",
           f'<h2><span class="id">{_text(qid)}</span> <span>{_html_math(one_line(title))}</span>'
           f' <span class="pts">{html.escape(got)}{auto_html}</span></h2>']
    out += [f'<p class="callout">{_html_line(p)}</p>' for p in _regraded(record, qid)]
    out += [f'<p class="callout note">{_text(t)}</p>' for t in (record.get("notes") or {}).get(qid, [])]
    out.append(f'<p class="public">{html.escape(_public_line(record, qid, points))}</p>')
    checks = [_html_check(c) for c in _checks(record, qid)]
    if checks:
        out += ['<ul class="checks">', *checks, "</ul>"]
    return out + ["</section>"]


def _html_header(record: Mapping[str, Any], assignment: str, final: Final | None) -> list[str]:
    score, top = ((final.score, final.max_score) if final is not None
                  else (record["score"], record["max_score"]))
    status = str(record["status"])
    klass = "status graded" if status == "graded" else "status"
    return ["<header>", f'<p class="kicker">Feedback · {_html_math(one_line(assignment))}</p>',
            f"<h1>{_text(record['submission'])}</h1>",
            f'<p class="score"><span><strong>{_fp(score)}</strong> <span class="of">/ '
            f'{_fp(top)} points</span></span> <span class="{klass}">status: {_text(status)}</span>'
            "</p>", "</header>"]


def feedback_html(record: Mapping[str, Any], *, assignment: str, points: Mapping[str, float],
                  titles: Mapping[str, str], final: Final | None = None) -> str:
    """A row's feedback as a self-contained HTML5 page (``<name>.html``).

    The same content, in the same order, as :func:`feedback_markdown`, written as HTML: the
    score at the top, how it was computed (with ``final``), the run's messages and each
    question's notes as call-outs, its checks as a list (✔ passed / ✘ failed, public or
    hidden). Inline CSS only: no script, no URL, and a Content-Security-Policy that loads
    nothing; readable on a phone and on a wide screen.

    Parameters
    ----------
    record, assignment, points, titles, final
        As for :func:`feedback_markdown`.

    Returns
    -------
    str
        The page. Student text is escaped and shown on one line with its invisible
        characters as ``<U+XXXX>``; ``$...$`` in the instructor's assignment, titles and
        descriptions is drawn as MathML (:func:`tex_mathml`), or shown as code.
    """
    title = f"Feedback: {one_line(str(record['submission']))} ({one_line(assignment)})"
    body = _html_header(record, assignment, final)
    if final is not None:
        body += ["<section>", "<h2>How your score was computed</h2>", "<ul>",
                 *[f"<li>{_html_line(p)}</li>" for p in _computation(final, points)],
                 "</ul>", "</section>"]
    body += [f'<p class="callout">{_text(m)}</p>' for m in record.get("messages", [])]
    for qid in points:
        body += _html_question(record, qid, points, titles.get(qid, qid), final)
    body.append(f"<footer><p>{html.escape(HIDDEN_NOTE)}</p></footer>")
    head = ['<!DOCTYPE html>', '<html lang="en">', "<head>", '<meta charset="utf-8">',
            f'<meta http-equiv="Content-Security-Policy" content="{CSP}">',
            '<meta name="referrer" content="no-referrer">',
            '<meta name="viewport" content="width=device-width, initial-scale=1">',
            f"<title>{html.escape(title)}</title>", f"<style>{CSS}</style>", "</head>"]
    return "\n".join([*head, "<body>", "<main>", *body, "</main>", "</body>", "</html>"]) + "\n"


# --------------------------------------------------------------------------- file names
MAX_NAME_CHARS = 100
#: UTF-8 bytes of a name, so that ``<name>.html`` stays within Linux's 255 bytes.
MAX_NAME_BYTES = 200
_KEEP = frozenset(" -_.()")
_RESERVED = frozenset({"CON", "PRN", "AUX", "NUL", "CONIN$", "CONOUT$"}
                      | {f"{d}{n}" for d in ("COM", "LPT") for n in "0123456789¹²³"})


def _digest(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8", "surrogatepass")).hexdigest()


def _fit(name: str, suffix: str) -> str:
    """``name + suffix``, ``name`` cut to fit the limits, with no trailing dot or space."""
    while len(name) + len(suffix) > MAX_NAME_CHARS or \
            len((name + suffix).encode("utf-8", "surrogatepass")) > MAX_NAME_BYTES:
        name = name[:-1]
    return (name.rstrip(" .") or "_") + suffix


def _safe_name(text: str, key: str) -> str:
    """``text`` as a file or folder name valid on Linux, macOS and Windows (see
    :func:`student_paths`); ``key`` names the hash used to shorten a long one."""
    chars = []
    for ch in unicodedata.normalize("NFC", text):
        cat = unicodedata.category(ch)
        if ch == "/":
            chars.append("-")
        elif ch in _KEEP or cat[0] in "LN" or (cat[0] == "M" and chars):
            chars.append(ch)
        else:
            chars.append("_")
    name = "".join(chars)
    lead = len(name) - len(name.lstrip(" ."))
    trail = len(name) - len(name.rstrip(" ."))
    name = "_" * lead + name[lead:]
    name = (name[: len(name) - trail] + "_" * trail) if trail else name
    name = name or "_"
    base, dot, rest = name.partition(".")
    if base.rstrip(" ").upper() in _RESERVED:
        name = f"{base}_{dot}{rest}"
    if len(name) > MAX_NAME_CHARS or len(name.encode("utf-8", "surrogatepass")) > MAX_NAME_BYTES:
        name = _fit(name, f"~{_digest(key)[:8]}")
    return name


def _unique(name: str, key: str, taken: set[str]) -> str:
    """``name``, or it with ``~<hash of key>`` (longer if need be) when ``taken`` has it."""
    digest = _digest(key)
    candidates = itertools.chain([name], (_fit(name, f"~{digest[:n]}") for n in (8, 16, 64)),
                                 (_fit(name, f"~{digest[:8]}-{k}") for k in itertools.count(1)))
    return next(c for c in candidates if c.casefold() not in taken)


_SUFFIX = re.compile(r"~[0-9a-f]{8,12}$")


def _still_valid(name: str) -> bool:
    """Whether a name given before (possibly with its ``~hash``) is one this module makes."""
    base = _SUFFIX.sub("", name)
    return (bool(base) and _safe_name(base, base) == base and len(name) <= MAX_NAME_CHARS
            and len(name.encode()) <= MAX_NAME_BYTES)


def student_paths(row_ids: Iterable[str], assignment: str, *,
                  previous: Mapping[str, tuple[str, str]] | None = None,
                  reserved: Iterable[str] = ()) -> dict[str, tuple[str, str]]:
    """Where each row's feedback goes in the hand-back tree: ``students/<folder>/<stem>.md``.

    Parameters
    ----------
    row_ids : Iterable[str]
        Row ids of the gradebook (``alice/01_feature_maps``; duplicates count once).
    assignment : str
        The stem of a row whose id has no ``/`` (a notebook not in a folder of its own).

    Returns
    -------
    dict[str, tuple[str, str]]
        Row id → ``(folder, stem)``: the folder is the student's
        (:func:`~kpca_lib.course.grading.record.roster.student_of`, a ``/`` inside it as ``-``),
        the stem the row id's last part. Both are NFC, keep letters, digits, marks and
        `` -_.()`` and have ``_`` for any other character; never start with a dot or a
        space nor end with one; a Windows device name (``CON``, ``com1.txt``) gets ``_``
        after it; at most 100 characters and 200 UTF-8 bytes (cut, then ``~`` and 8 hex
        digits of a SHA-256). Different students get folders that differ ignoring case
        (:meth:`str.casefold`), and the rows of a student stems that do; where they would
        not, the later name in sorted order gets ``~`` and a hash of its student or row id.
        The result does not depend on the order of ``row_ids``.
    previous : Mapping[str, tuple[str, str]], optional
        The names given before (the tree's index): a student's folder and a row's stem stay
        as they were while they are valid and unique, so that a newcomer whose name clashes
        never takes over a folder already handed back.
    reserved : Iterable[str]
        Folder names no student gets (the index's own file).
    """
    ids = sorted(set(row_ids))
    previous = previous or {}
    folders: dict[str, str] = {}
    taken: set[str] = {r.casefold() for r in reserved}
    students = sorted({student_of(rid) for rid in ids})
    for student in students:  # the folders handed back before keep their names
        before = {previous[rid][0] for rid in ids if rid in previous and student_of(rid) == student}
        name = before.pop() if len(before) == 1 else ""
        if name and _still_valid(name) and name.casefold() not in taken:
            folders[student] = name
            taken.add(name.casefold())
    for student in students:
        if student not in folders:
            folders[student] = _unique(_safe_name(student, student), student, taken)
            taken.add(folders[student].casefold())
    stems: dict[str, set[str]] = {}
    out: dict[str, tuple[str, str]] = {}
    for keep in (True, False):
        for rid in ids:
            folder = folders[student_of(rid)]
            used = stems.setdefault(folder, set())
            old = previous.get(rid)
            if keep:
                if (old and old[0] == folder and _still_valid(old[1])
                        and old[1].casefold() not in used):
                    out[rid] = (folder, old[1])
                    used.add(old[1].casefold())
                continue
            if rid in out:
                continue
            part = rid.rsplit("/", 1)[1] if "/" in rid else assignment
            stem = _unique(_safe_name(part, rid), rid, used)
            used.add(stem.casefold())
            out[rid] = (folder, stem)
    return out


# --------------------------------------------------------------------------- zip
ZIP_TIME = (1980, 1, 1, 0, 0, 0)


def _zip_name(name: str) -> str:
    parts = name.split("/")
    if (not name or name.startswith("/") or "\\" in name or "\x00" in name
            or any(p in ("", ".", "..") for p in parts) or re.match(r"^[A-Za-z]:", name)):
        raise ValueError(f"{name!r} is not a relative path of a file (no '..', no leading '/')")
    return name


def zip_folder(files: Mapping[str, bytes]) -> bytes:
    """A zip archive of ``files`` (relative path with ``/`` → content), the same bytes for the
    same files: sorted names, 1980-01-01 00:00 times, deflated, mode 0644.

    Raises
    ------
    ValueError
        For a name that is empty, absolute, has ``..``, ``.``, an empty part, a backslash or
        a drive letter.
    """
    names = sorted(_zip_name(n) for n in files)
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w", zipfile.ZIP_DEFLATED) as archive:
        for name in names:
            info = zipfile.ZipInfo(name, date_time=ZIP_TIME)
            info.compress_type = zipfile.ZIP_DEFLATED
            info.create_system = 3  # Unix, so that the mode below is read
            info.external_attr = 0o100644 << 16
            archive.writestr(info, bytes(files[name]), compresslevel=9)
    return buffer.getvalue()
