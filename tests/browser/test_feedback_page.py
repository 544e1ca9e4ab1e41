"""The student's HTML feedback page in headless Chromium, offline.

The page of a row with a failed check is opened from a file with every request that is not
the page itself refused (and recorded: there must be none), at 1400 px and at a phone's
width. The score and the ✘ message must be shown, nothing may scroll sideways on the phone,
and the screenshots (``build/screenshots/feedback-html.png``, ``feedback-html-phone.png``)
must be drawn: many colours, the red of ✘ and the green of ✔.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from PIL import Image  # matplotlib's own dependency: always there

from kpca_lib.course.grading.handback.feedback import feedback_html
from kpca_lib.course.grading.judge.evaluate import CheckResult
from kpca_lib.course.grading.judge.notebooks import read_solution
from kpca_lib.course.grading.record.policy import finalize, parse_adjustments, parse_policy
from kpca_lib.course.grading.record.rows import Row
from kpca_lib.course.grading.record.rows import row_record as _record

from .conftest import ROOT, SCREENSHOTS

pytest.importorskip("playwright.sync_api")

pytestmark = pytest.mark.browser

FAILED = "expected 6 features, got 5: the constant 1 is missing <b>&</b>"
PHONE = {"width": 390, "height": 844}


def feedback_page() -> str:
    solution = read_solution(ROOT / "solutions" / "01_feature_maps.ipynb")
    q1, q2, q3, q4 = solution.questions
    row = Row(
        "alice/01_feature_maps", "alice/01_feature_maps.ipynb", max_score=solution.max_score,
        questions={q1: 3.0, q2: 1.0, q3: 3.0, q4: 0.0},
        checks=[
            CheckResult("a", q1, "φ(x)ᵀφ(y) = (xᵀy + 1)^3 on random points in R²", 2, True, "", False),
            CheckResult("b", q1, "dim_3 is the dimension D of the feature space", 1, True, "", False),
            CheckResult("c", q2, "φ(x)ᵀφ(y) = (xᵀy + 1)^4 on random points in R²", 1, True, "", False),
            CheckResult("d", q2, "dim_4 is the dimension D of the feature space", 2, False, FAILED, False),
            CheckResult("e", q3, "phi_poly(X, 2) for d = 5: one feature per monomial", 3, True, "", True),
        ],
        messages=["q1_phi_general: code cell 7 printed 2000 lines; the first 200 are kept."],
        notes={q2: ["code cell 5 raised ValueError: operands could not be broadcast together"]},
    )
    record = _record(row)
    record["file_time"] = "2026-12-02T09:30:00+01:00"
    policy = parse_policy('[questions]\nby_hand = ["q2_feature_count"]\n[late]\n'
                          "deadline = 2026-12-01T23:59:00+01:00\nsubmitted = \"file\"\npenalty_per_day = 10\n")
    adjustments = parse_adjustments("row,question,points,score,reason\nalice/01_feature_maps,"
                                    "q1_phi_p4,+1,,the check missed the constant feature's "
                                    "scaling by √2\n")
    final = finalize(record, solution.points, policy=policy, adjustments=adjustments)
    titles = {q: solution.question(q).title for q in solution.questions}
    titles[q3] += r" (kernel $k(x, y) = (x^\top y + 1)^p$)"
    return feedback_html(record, assignment=solution.assignment, points=solution.points,
                         titles=titles, final=final)


def colours(path: Path) -> tuple[int, int, int]:
    """Distinct colours, red pixels (✘, failed) and green pixels (✔, passed) of a screenshot."""
    with Image.open(path) as image:
        rgb = np.asarray(image.convert("RGB"), dtype=int).reshape(-1, 3)
    r, g, b = rgb.T
    red = int(np.sum((r > 150) & (g < 90) & (b < 90)))
    green = int(np.sum((g > 100) & (r < 80) & (b < 100)))
    return len(np.unique(rgb, axis=0)), red, green


def test_feedback_page_offline(page, tmp_path):
    html_file = tmp_path / "feedback.html"
    html_file.write_text(feedback_page(), encoding="utf-8")
    url = html_file.as_uri()
    requests: list[str] = []

    def route(r):
        if r.request.url != url:
            requests.append(r.request.url)
        if r.request.url.startswith("file:"):
            r.continue_()
        else:
            r.abort()

    page.route("**/*", route)
    page.on("request", lambda r: r.url != url and requests.append(r.url))
    page.goto(url)
    page.wait_for_load_state("load")

    body = page.inner_text("body")
    assert "7.2\n/ 12 points" in body or "7.2 / 12 points" in body  # 3+2+3+0, 10 % late
    assert "✘" in body and "failed" in body and FAILED in body
    assert "How your score was computed" in body and "1 day late, 10% off" in body
    assert "not graded yet" in body
    assert page.locator("math").count() == 1
    assert page.title() == "Feedback: alice/01_feature_maps (01_feature_maps)"
    assert page.evaluate("document.scripts.length") == 0

    SCREENSHOTS.mkdir(parents=True, exist_ok=True)
    wide = SCREENSHOTS / "feedback-html.png"
    page.screenshot(path=str(wide), full_page=True)
    page.set_viewport_size(PHONE)
    assert page.evaluate("document.scrollingElement.scrollWidth") <= PHONE["width"]
    phone = SCREENSHOTS / "feedback-html-phone.png"
    page.screenshot(path=str(phone), full_page=True)

    assert requests == []  # nothing but the page itself, not even a favicon
    for shot in (wide, phone):
        n, red, green = colours(shot)
        assert n > 50 and red > 30 and green > 30, (shot, n, red, green)
