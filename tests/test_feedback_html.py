"""A student's feedback as Markdown and as a self-contained HTML page, and the hand-back tree.

* The Markdown without a final grade is byte for byte what the grader writes today
  (:func:`kpca_lib.course.grading.handback.feedback.row_feedback`), for plain and hostile rows.
* With a :class:`~kpca_lib.course.grading.record.policy.Final`, both documents show the final
  score and how it was computed (adjustments and their reasons, by-hand questions, late
  work), never the instructor's warnings.
* The HTML page loads nothing and runs nothing, whatever the student's text: parsed with
  the standard library's parser, it has no script, image, frame, link, event handler or URL.
* The hand-back names (:func:`student_paths`) are valid on every system and unique ignoring
  case, checked on examples and with Hypothesis; :func:`zip_folder` is reproducible.

The page in a real browser is tested in ``tests/browser/test_feedback_page.py``.
"""

from __future__ import annotations

import io
import json
import random
import re
import unicodedata
import zipfile
from html.parser import HTMLParser
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from kpca_lib.course.grading.handback.feedback import (
    MAX_NAME_CHARS,
    feedback_html,
    feedback_markdown,
    student_paths,
    tex_mathml,
    zip_folder,
)
from kpca_lib.course.grading.handback.feedback import row_feedback as _feedback
from kpca_lib.course.grading.judge.evaluate import CheckResult
from kpca_lib.course.grading.judge.notebooks import read_solution
from kpca_lib.course.grading.record.policy import finalize, parse_adjustments, parse_policy
from kpca_lib.course.grading.record.rows import Row
from kpca_lib.course.grading.record.rows import row_record as _record
from kpca_lib.course.grading.text import markdown_text, one_line

ROOT = Path(__file__).resolve().parents[1]
SOLUTION = read_solution(ROOT / "solutions" / "01_feature_maps.ipynb")
QS = SOLUTION.questions
TITLES = {q: SOLUTION.question(q).title for q in QS}
ASSIGNMENT = SOLUTION.assignment

HOSTILE = [
    "<script>alert(1)</script>",
    "<img src=x onerror=alert(1)>",
    "[click](javascript:alert(1)) ![](http://evil.example/t.png)",
    "</textarea></title></style><iframe src=//evil.example>",
    "<a href='http://evil.example' onclick=\"x()\">x</a> & &amp; \"quoted\" 'single'",
    "right\u202eto left\u200b\u2066isolate\u2069 \x1b[31mred\x1b[0m \x00nul \x07bell",
    "line one\n# line two\r\n<link rel=stylesheet href=http://evil.example/x.css>",
    "$x^2$ <math><mi>x</mi></math> <svg onload=alert(1)>",
    "<base href=http://evil.example/><meta http-equiv=refresh content='0;url=http://e'>",
]


def make_row(text: str = "plain words", *, submission: str = "alice/01_feature_maps",
             status: str = "graded", failed: bool = True) -> Row:
    q1, q2 = QS[0], QS[1]
    checks = [
        CheckResult("c1", q1, "φ(x)ᵀφ(y) = (xᵀy + 1)^3 on random points", 2.0, not failed,
                    f"expected 1.0, got 2.0: {text}" if failed else "", False),
        CheckResult("c2", q1, "dim_3 is the dimension D", 1.0, True, "", False),
        CheckResult("c3", q2, "hidden: phi_p4 on the grader's points", 1.5, False, text, True),
    ]
    return Row(submission=submission, file="x.ipynb", status=status,
               max_score=SOLUTION.max_score,
               questions={QS[0]: 1.0, QS[1]: 3.0, QS[2]: 2.5, QS[3]: 0.5}, checks=checks,
               messages=[text, f"{q1}: code cell 3 (`{text}`) stopped"],
               notes={q1: [f"code cell 4 raised ValueError: {text}", text], q2: [text]})


def markdown(record: dict[str, Any], final=None) -> str:
    return feedback_markdown(record, assignment=ASSIGNMENT, points=SOLUTION.points,
                             titles=TITLES, final=final)


def page(record: dict[str, Any], final=None) -> str:
    return feedback_html(record, assignment=ASSIGNMENT, points=SOLUTION.points, titles=TITLES,
                         final=final)


# --------------------------------------------------------------------------- Markdown
ROWS = [
    make_row(),
    make_row(failed=False),
    make_row(submission="Ünïcödé/01_feature_maps", status="timeout"),
    make_row(submission="bob", status="crashed"),
    Row("carol/01_feature_maps", "c.ipynb", status="invalid", max_score=SOLUTION.max_score,
        questions={q: 0.0 for q in QS}, messages=["not a notebook of 01_feature_maps"]),
    Row("dave/01_feature_maps", "d.ipynb", max_score=SOLUTION.max_score, questions={}),
    *[make_row(h, submission=h) for h in HOSTILE],
]


@pytest.mark.parametrize("row", ROWS, ids=range(len(ROWS)))
def test_markdown_of_a_record_is_the_rows_feedback(row):
    """The grader's feedback/ file and the hand-back page's Markdown are one renderer: a
    row and its grades.json entry (read back as JSON) give the same text, every question
    has its heading and every check its mark."""
    text = markdown(json.loads(json.dumps(_record(row))))
    assert text == _feedback(row, SOLUTION)
    for qid in QS:
        assert f"## {markdown_text(qid, identifiers=True)}: " in text
    assert text.count("✔") + text.count("✘") == len(row.checks)


# --------------------------------------------------------------------------- a final grade
POLICY = """
[questions]
by_hand = ["q2_feature_count"]

[late]
deadline = 2026-12-01T23:59:00+01:00
submitted = "file"
penalty_per_day = 10
"""
ADJUSTMENTS = """row,question,points,score,reason
alice/01_feature_maps,q1_phi_p3,+1,,the check missed an equivalent <form> & sign
alice/01_feature_maps,,-0.5,,header fixed late
alice/01_feature_maps,q1_phi_p4,+5,,clamped: over the top
"""


def final_of(record: dict[str, Any], adjustments: str = ADJUSTMENTS, policy: str = POLICY):
    return finalize(record, SOLUTION.points, policy=parse_policy(policy),
                    adjustments=parse_adjustments(adjustments))


@pytest.fixture
def late_record() -> dict[str, Any]:
    record = _record(make_row())
    record["file_time"] = "2026-12-03T10:00:00+01:00"  # 1 day 10 h after: 2 started days
    return record


def test_final_grade_is_explained(late_record):
    final = final_of(late_record)
    # 1+1, 3 (3+5 clamped), 2.5, by hand pending 0; -0.5; 20 % late of 7
    assert (final.subtotal, final.penalty, final.score) == (7.0, 1.4, 5.6)
    assert final.warnings and final.pending == ("q2_feature_count",)
    text = markdown(late_record, final)
    assert "**Score: 5.6 / 12** (status: graded)" in text
    assert "## How your score was computed" in text
    assert "- Automatic score (the checks): 7 / 12." in text
    assert ("- Adjustment to q1_phi_p3: +1 — the check missed an equivalent \\<form\\> \\& sign"
            in text)
    assert "- Adjustment to the whole submission: -0.5 — header fixed late" in text
    assert "- q2_feature_count is graded by hand: not graded yet (it counts 0 of 3 until it is)." in text
    assert ("- Submitted late: 2026-12-03T10:00:00+01:00, due 2026-12-01T23:59:00+01:00; "
            "2 days late, 20% off: -1.4 points.") in text
    assert "- Final score: 5.6 / 12." in text
    assert "## q1_phi_p3: Explicit φ for p = 3, d = 2 (2 / 3) (automatic: 1)" in text
    assert "## q1_phi_p4: Explicit φ for p = 4, d = 2 (3 / 3)\n" in text  # clamped to auto
    assert "## q2_feature_count: Counting features; when is the kernel cheaper? (not graded yet; 3 points)" in text
    for warning in final.warnings:  # the instructor's, not the student's
        assert warning not in text and "outside" not in text
    assert text.index("How your score") < text.index("> plain words") < text.index("## q1_phi_p3")


def test_final_grade_in_html(late_record):
    final = final_of(late_record)
    doc = parse(page(late_record, final))
    body = doc.text
    assert "5.6 / 12 points" in body and "How your score was computed" in body
    assert "Adjustment to q1_phi_p3: +1 — the check missed an equivalent <form> & sign" in body
    assert "Adjustment to the whole submission: -0.5 — header fixed late" in body
    assert "q2_feature_count is graded by hand: not graded yet (it counts 0 of 3 until it is)." in body
    assert "2 days late, 20% off: -1.4 points." in body
    assert "2 / 3 (automatic: 1)" in body and "not graded yet; 3 points" in body
    assert "outside" not in body and "form" not in doc.tags


def test_graded_by_hand_on_time_and_unknown_time():
    record = _record(make_row())
    record["file_time"] = "2026-12-01T23:00:00+01:00"
    adjustments = ("row,question,points,score,reason\n"
                   "alice/01_feature_maps,q2_feature_count,,2.5,a clear argument\n")
    final = final_of(record, adjustments)
    text = markdown(record, final)
    assert "- Adjustment to q2_feature_count: = 2.5 (graded by hand) — a clear argument" in text
    assert "(2.5 / 3, graded by hand)" in text and "not graded yet" not in text
    assert "- Submitted on time: 2026-12-01T23:00:00+01:00, due 2026-12-01T23:59:00+01:00." in text
    assert "**Score: 9 / 12**" in text
    del record["file_time"]
    unknown = markdown(record, final_of(record, adjustments))
    assert "the grader does not know when you handed this in" in unknown
    assert "no late penalty was applied" in unknown
    assert "graded by hand" in parse(page(record, final)).text


def test_regraded_questions_are_said():
    record = _record(make_row())
    record["regraded"] = [{"question": QS[1], "at": "2026-12-05T10:00:00+00:00",
                           "before": 1.5, "after": 3.0}]
    text = markdown(record)
    assert "Regraded on 2026-12-05T10:00:00+00:00: before, the checks gave 1.5 points." in text
    assert "Regraded on 2026-12-05T10:00:00+00:00" in parse(page(record)).text


# --------------------------------------------------------------------------- the HTML page
class Page(HTMLParser):
    """Every start tag with its attributes, and the text (character references decoded)."""

    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.starts: list[tuple[str, list[tuple[str, str | None]]]] = []
        self.chunks: list[str] = []
        self.style = False

    def handle_starttag(self, tag, attrs):
        self.starts.append((tag, attrs))
        self.style = tag == "style"

    def handle_startendtag(self, tag, attrs):
        self.starts.append((tag, attrs))

    def handle_endtag(self, tag):
        self.style = False

    def handle_data(self, data):
        if not self.style:
            self.chunks.append(data)

    @property
    def tags(self) -> set[str]:
        return {t for t, _ in self.starts}

    @property
    def text(self) -> str:
        return re.sub(r"\s+", " ", "".join(self.chunks))


def parse(text: str) -> Page:
    p = Page()
    p.feed(text)
    p.close()
    return p


ALLOWED_TAGS = {"html", "head", "meta", "title", "style", "body", "main", "header", "section",
                "footer", "h1", "h2", "p", "ul", "li", "span", "strong", "div", "code", "math",
                "mrow", "mi", "mn", "mo", "msup", "msub", "msubsup", "mfrac", "msqrt", "mspace"}


def assert_inert(text: str) -> Page:
    doc = parse(text)
    assert text.startswith("<!DOCTYPE html>\n<html lang=\"en\">")
    assert doc.tags <= ALLOWED_TAGS, doc.tags - ALLOWED_TAGS
    assert [t for t, _ in doc.starts].count("style") == 1
    for tag, attrs in doc.starts:
        for name, value in attrs:
            assert not name.startswith("on"), (tag, name)
            assert name not in ("href", "src", "srcset", "action", "style", "background"), tag
            assert not re.search(r"https?:|//|javascript:|url\(", value or "", re.I), (tag, value)
    metas = [dict(a) for t, a in doc.starts if t == "meta"]
    assert {"charset": "utf-8"} in metas
    assert {"http-equiv": "Content-Security-Policy",
            "content": "default-src 'none'; style-src 'unsafe-inline'"} in metas
    assert len(metas) == 4  # charset, CSP, referrer, viewport: none from the student
    style = text[text.index("<style>"):text.index("</style>")]
    assert "url(" not in style and "@import" not in style and "http" not in style
    assert "<script" not in text.lower() and "<iframe" not in text.lower()
    return doc


@pytest.mark.parametrize("hostile", HOSTILE)
def test_hostile_text_is_shown_never_obeyed(hostile):
    record = _record(make_row(hostile, submission=hostile))
    text = page(record, final_of(record))
    doc = assert_inert(text)
    shown = one_line(hostile)
    assert shown in doc.text  # visible, as itself (escaped in the source)
    assert doc.text.count(shown) >= 6  # title, heading, messages, notes, check messages
    assert not [c for c in doc.text if unicodedata.category(c) in ("Cc", "Cf")]
    assert "math" not in doc.tags  # the student's $...$ is text


def test_a_plain_page_is_inert_and_complete():
    doc = assert_inert(page(_record(make_row())))
    body = doc.text
    assert "Feedback · 01_feature_maps" in body and "alice/01_feature_maps" in body
    assert "7 / 12 points" in body and "status: graded" in body
    assert "✘ failed public check (2 pt) φ(x)ᵀφ(y) = (xᵀy + 1)^3 on random points" in body
    assert "expected 1.0, got 2.0: plain words" in body
    assert "✔ passed public check (1 pt)" in body and "✘ failed hidden check (1.5 pt)" in body
    assert body.index("q1_phi_p3") < body.index("q1_phi_p4") < body.index("q2_feature_count")
    assert "Hidden checks are named by what they test" in body


def test_instructor_math_is_mathml_student_math_is_text():
    titles = {**TITLES, QS[0]: r"The map $\phi(x)^\top\phi(y)$ and $\frac{1}{\sqrt{2}}$"}
    record = _record(make_row("$x^2$ from the student"))
    text = feedback_html(record, assignment=ASSIGNMENT, points=SOLUTION.points, titles=titles)
    assert text.count("<math") == 2 and "<mfrac>" in text and "<msqrt>" in text
    assert "$x^2$ from the student" in parse(text).text  # not math
    assert tex_mathml(r"\phi^\top") == ('<math display="inline"><mrow><msup><mi>ϕ</mi><mi>⊤</mi>'
                                        "</msup></mrow></math>")
    assert tex_mathml("x < y") == ('<math display="inline"><mrow><mi>x</mi><mo>&lt;</mo>'
                                   "<mi>y</mi></mrow></math>")
    for unknown in (r"\href{http://e}{x}", "a^", "{a", "x^a^b", r"\unknown", "a}"):
        assert tex_mathml(unknown) is None, unknown
    titles[QS[0]] = r"with $\href{http://evil.example}{x}$ and $5 but 6$"
    shown = feedback_html(record, assignment=ASSIGNMENT, points=SOLUTION.points, titles=titles)
    assert "<code>\\href{http://evil.example}{x}</code>" in shown  # shown verbatim, not a link
    assert "<a" not in shown


# --------------------------------------------------------------------------- hand-back names
RESERVED = re.compile(r"^(con|prn|aux|nul|conin\$|conout\$|com[0-9¹²³]|lpt[0-9¹²³])$", re.I)


def valid_name(name: str) -> bool:
    base = name.split(".")[0].rstrip(" ")
    return (0 < len(name) <= MAX_NAME_CHARS and len(name.encode("utf-8", "surrogatepass")) <= 200
            and unicodedata.is_normalized("NFC", name)
            and all(c.isalnum() or c in " -_.()~" or unicodedata.category(c)[0] in "LNM"
                    for c in name)
            and not name.startswith((".", " ")) and not name.endswith((".", " "))
            and not RESERVED.match(base) and "/" not in name and "\\" not in name)


def check_paths(ids: list[str], assignment: str = "01_feature_maps") -> dict[str, tuple[str, str]]:
    paths = student_paths(ids, assignment)
    assert set(paths) == set(ids)
    for folder, stem in paths.values():
        assert valid_name(folder) and valid_name(stem), (folder, stem)
        assert len(f"{stem}.html".encode("utf-8", "surrogatepass")) <= 255  # Linux's limit
    keys = [(f.casefold(), s.casefold()) for f, s in paths.values()]
    assert len(set(keys)) == len(keys)
    folders: dict[str, set[str]] = {}
    for rid, (folder, _) in paths.items():  # one folder per student, different students apart
        folders.setdefault(folder.casefold(), set()).add(rid.rsplit("/", 1)[0] if "/" in rid else rid)
    assert all(len(s) == 1 for s in folders.values())
    shuffled = list(ids)
    random.Random(0).shuffle(shuffled)
    assert student_paths(reversed(shuffled), assignment) == paths
    return paths


def test_student_paths_examples():
    paths = check_paths([
        "alice/01_feature_maps", "alice/02_pca", "bob",
        "sec1/carol/01", "CON/01", "x/aux.txt", "x/com1", "x/LPT9.tar.gz", ".hidden/..",
        "d/a<b>:c\"|?*%\\e", "e/trailing. ", "f/" + "ü" * 150, "f/" + "ü" * 149 + "x",
        "e\u0301/x", "\u00e9/y", "g/ab", "g/AB", "h/Straße", "h/STRASSE", "i/\u202eevil",
        "", "j/", "k/\ud800",
    ])
    assert paths["alice/01_feature_maps"] == ("alice", "01_feature_maps")
    assert paths["alice/02_pca"] == ("alice", "02_pca")
    assert paths["bob"] == ("bob", "01_feature_maps")
    assert paths["sec1/carol/01"] == ("sec1-carol", "01")
    assert paths["CON/01"] == ("CON_", "01")
    assert paths["x/aux.txt"][1] == "aux_.txt" and paths["x/com1"][1] == "com1_"
    assert paths["x/LPT9.tar.gz"][1] == "LPT9_.tar.gz"
    assert paths[".hidden/.."] == ("_hidden", "__")
    assert paths["d/a<b>:c\"|?*%\\e"][1] == "a_b__c______e"
    assert paths["e/trailing. "][1] == "trailing__"
    long = paths["f/" + "ü" * 150][1]
    assert len(long) == MAX_NAME_CHARS and re.fullmatch(r"ü{91}~[0-9a-f]{8}", long)
    assert paths["e\u0301/x"][0] != paths["\u00e9/y"][0]  # the same folder after NFC: told apart
    assert paths["i/\u202eevil"][1] == "_evil"
    assert paths[""] == ("_", "01_feature_maps") and paths["j/"] == ("j", "_")


def test_later_duplicates_get_a_hash_whatever_the_order():
    paths = student_paths(["b/x", "B/x", "a/q", "A/q"], "hw")
    assert paths["A/q"] == ("A", "q") and re.fullmatch(r"a~[0-9a-f]{8}", paths["a/q"][0])
    assert paths["B/x"] == ("B", "x") and paths["b/x"][0].startswith("b~")


ROW_IDS = st.lists(
    st.one_of(
        st.text(max_size=12),
        st.text(alphabet="aAbB/._ -~CONcon1", max_size=8),
        st.text(alphabet=st.characters(codec="utf-8"), min_size=90, max_size=130),
    ),
    max_size=12,
)


@settings(max_examples=200, deadline=None)
@given(ROW_IDS, st.sampled_from(["01_feature_maps", "CON", "a/b", ""]))
def test_student_paths_are_valid_and_unique(ids, assignment):
    check_paths(ids, assignment)


# --------------------------------------------------------------------------- zip
def test_zip_folder_round_trip_and_reproducible():
    files = {"students/bob/01.md": b"# bob\n", "students/alice/01.html": "é ✔".encode(),
             "students/Ünï/01.md": b"", "README.txt": b"x" * 10_000}
    data = zip_folder(files)
    assert data == zip_folder(dict(reversed(list(files.items()))))
    with zipfile.ZipFile(io.BytesIO(data)) as archive:
        assert archive.namelist() == sorted(files)
        assert {n: archive.read(n) for n in archive.namelist()} == files
        for info in archive.infolist():
            assert info.date_time == (1980, 1, 1, 0, 0, 0)
            assert info.compress_type == zipfile.ZIP_DEFLATED
            assert info.external_attr >> 16 == 0o100644
        assert archive.testzip() is None


@pytest.mark.parametrize("name", ["", "/etc/passwd", "../x", "a/../b", "a//b", "a/./b", "a\\b",
                                  "C:/x", "a/", "./a"])
def test_zip_folder_refuses_names_that_leave_the_folder(name):
    with pytest.raises(ValueError):
        zip_folder({name: b"x"})


def test_names_handed_back_once_stay_when_a_clashing_student_arrives():
    """A newcomer whose folder name clashes with a student's (case, characters replaced)
    gets the ~hash, never the folder already handed back; without the index the sorted
    order would decide."""
    first = student_paths(["alice/01", "a_b/01"], "01")
    assert first == {"alice/01": ("alice", "01"), "a_b/01": ("a_b", "01")}
    later = student_paths(["ALICE/01", "alice/01", "a?b/01", "a_b/01"], "01", previous=first)
    assert later["alice/01"] == ("alice", "01") and later["a_b/01"] == ("a_b", "01")
    assert later["ALICE/01"][0].startswith("ALICE~") and later["a?b/01"][0].startswith("a_b~")
    assert student_paths(["ALICE/01", "alice/01"], "01", previous=later) == {
        k: later[k] for k in ("ALICE/01", "alice/01")}
    # A name of the index that is not one this module makes is not kept.
    forged = student_paths(["alice/01"], "01", previous={"alice/01": ("../x", "01")})
    assert forged == {"alice/01": ("alice", "01")}
    assert student_paths(["index.json/01"], "01", reserved=["INDEX.json"])["index.json/01"][0] != (
        "index.json")
