"""The course as a student meets it: JupyterLab in Chromium, widgets drawn and working.

1. The two-moons lecture: open it, run all cells, the σ slider is drawn (no "Error
   displaying widget" anywhere), moving it redraws the plot.
2. The widget homework: run it, choose σ with the slider until the status line says the
   moons are separated, copy the line the widget shows into the answer cell, save with
   Ctrl+S, and read the saved notebook as the grader does.

Screenshots of every step go to build/screenshots/ (see conftest.py).
"""

from __future__ import annotations

import os
import re
from pathlib import Path

import nbformat
import pytest

from .conftest import LAB_LOG, ROOT, TIMEOUT_MS, VIEWPORT, open_lab, shot

sync_api = pytest.importorskip("playwright.sync_api")
expect = sync_api.expect
expect.set_options(timeout=TIMEOUT_MS)

pytestmark = pytest.mark.browser

LECTURE = ROOT / "notebooks" / "06_two_moons.ipynb"
SIGMA_QUESTION = "q7_sigma_moons"  # the exercise whose σ slider records the answer
ERROR_WIDGET = "Error displaying widget"
VIEWPORT_HEIGHT = VIEWPORT["height"]

# --------------------------------------------------------------------------- JupyterLab UI

RUN_FINISHED = """() => {
  const panel = document.querySelector('.jp-NotebookPanel');
  if (!panel) return false;
  const status = panel.querySelector('.jp-Notebook-ExecutionIndicator');
  const prompts = [...panel.querySelectorAll('.jp-CodeCell .jp-InputPrompt')];
  return status !== null && status.dataset.status === 'idle'
    && prompts.every(p => !p.textContent.includes('*'));
}"""


def open_notebook(page, lab, path: Path):
    """Open a notebook in a clean workspace and wait until its kernel is idle."""
    open_lab(page, lab.open_url(path.name), path.stem, LAB_LOG)
    panel = page.locator(".jp-NotebookPanel")
    expect(panel).to_be_visible()
    expect(page.locator("#jp-main-statusbar")).to_contain_text("Python 3 (ipykernel) | Idle")
    expect(panel.locator(".jp-Notebook-ExecutionIndicator")).to_have_attribute(
        "data-status", "idle"
    )
    return panel


def menu(page, top: str, item: str) -> None:
    """Click a menu entry of JupyterLab's menu bar, as a student does."""
    page.locator(".lm-MenuBar-itemLabel", has_text=re.compile(f"^{top}$")).click()
    page.get_by_role("menuitem", name=item, exact=True).click()


def wait_until_run(page) -> None:
    page.wait_for_function(RUN_FINISHED, timeout=3 * TIMEOUT_MS)


def code_cell(panel, source_snippet: str):
    """The code cell whose source contains ``source_snippet`` (pinned by position, so the
    locator stays valid when the student edits the cell)."""
    cells = panel.locator(".jp-CodeCell")
    expect(cells.filter(has_text=source_snippet).first).to_be_attached()
    # one entry per code cell (a folded cell, such as a question cell, has no editor shown)
    sources = cells.evaluate_all(
        "cells => cells.map(c => (c.querySelector('.jp-InputArea-editor') || {}).textContent || '')")
    matches = [i for i, src in enumerate(sources) if source_snippet in src]
    assert len(matches) == 1, f"{len(matches)} code cells contain {source_snippet!r}"
    return cells.nth(matches[0])


def assert_cells_ran_cleanly(panel) -> None:
    prompts = panel.locator(".jp-CodeCell .jp-InputPrompt").all_text_contents()
    not_run = [i for i, p in enumerate(prompts) if not re.fullmatch(r"\[\d+\]:", p.strip())]
    errors = [
        t
        for t in panel.locator(
            '.jp-OutputArea-output[data-mime-type="application/vnd.jupyter.stderr"]'
        ).all_text_contents()
        if "Traceback" in t or "Error" in t.split("\n", 1)[0]
    ]
    assert not errors, "a cell raised:\n" + "\n\n".join(errors)
    assert not not_run, f"code cells {not_run} did not run (prompts {prompts})"


def assert_cells_ran_cleanly_above(panel, last) -> None:
    """No error output in the notebook so far (cells below ``last`` have not run)."""
    errors = [
        t
        for t in panel.locator(
            '.jp-OutputArea-output[data-mime-type="application/vnd.jupyter.stderr"]'
        ).all_text_contents()
        if "Traceback" in t
    ]
    assert not errors, "a cell raised:\n" + "\n\n".join(errors)


def assert_no_widget_errors(page) -> None:
    """No "Error displaying widget" on the page, and no error in the browser's console
    (where the widget manager reports a model or view it cannot create)."""
    expect(page.get_by_text(ERROR_WIDGET)).to_have_count(0)
    assert ERROR_WIDGET not in page.content()
    errors = [m for m in page.console_log if m.startswith(("[error]", "[pageerror]"))]
    assert not errors, "errors in the browser console:\n" + "\n".join(errors)


def figure_of(explorer):
    """The explorer's figure as drawn in its output widget (an <img> of the PNG)."""
    return explorer.locator(".widget-output img")


CENTRE = """e => new Promise(done => {
  // Cells outside the view are laid out (content-visibility) only once they come near it,
  // which moves the target: scroll again, a frame later, until it stays put.
  let last = null, frames = 0;
  const step = () => {
    e.scrollIntoView({block: 'center'});
    requestAnimationFrame(() => {
      const top = e.getBoundingClientRect().top;
      if ((last !== null && Math.abs(top - last) < 1) || ++frames > 30) { done(); return; }
      last = top;
      step();
    });
  };
  step();
})"""


def centre(locator) -> None:
    """Scroll so that ``locator`` is in the middle of the notebook, for a screenshot."""
    page = locator.page
    locator.evaluate(CENTRE)
    # The notebook's end may not be laid out yet, so it cannot scroll further: scroll with
    # the mouse wheel, as a student does, until the target has come up.
    for _ in range(20):
        box = locator.bounding_box()
        if box is None or box["y"] + min(box["height"], 400) <= 0.9 * VIEWPORT_HEIGHT:
            return
        page.mouse.move(800, 450)
        page.mouse.wheel(0, 300)
        locator.evaluate(CENTRE)


def run_cell_and_advance(page) -> None:
    page.keyboard.press("Shift+Enter")


def drag_slider(page, slider, fraction: float) -> None:
    """Drag the slider's handle with the mouse to ``fraction`` (0..1) of its track."""
    slider.scroll_into_view_if_needed()
    handle = slider.locator(".noUi-handle")
    track = slider.locator(".noUi-base")
    h, t = handle.bounding_box(), track.bounding_box()
    start = (h["x"] + h["width"] / 2, h["y"] + h["height"] / 2)
    page.mouse.move(*start)
    page.mouse.down()
    page.mouse.move(t["x"] + fraction * t["width"], start[1], steps=12)
    page.mouse.up()


# --------------------------------------------------------------------------- scenario 1


def test_two_moons_lecture_sigma_slider(served, page):
    notebook = served.serve(LECTURE)
    panel = open_notebook(page, served, notebook)
    shot(page, "06_two_moons-1-opened")
    # Before running, the stored outputs show (no live widgets yet, but no error either).
    centre(code_cell(panel, "sigma_explorer(").locator(".jp-OutputArea"))
    assert_no_widget_errors(page)
    shot(page, "06_two_moons-2-stored-explorer")

    menu(page, "Run", "Run All Cells")
    wait_until_run(page)
    assert_cells_ran_cleanly(panel)

    cell = code_cell(panel, "sigma_explorer(")
    explorer = cell.locator(".jp-OutputArea-output .widget-vbox").first
    slider = explorer.locator(".widget-slider")
    expect(slider).to_be_visible()
    expect(slider.locator(".widget-label")).to_have_text("σ")
    readout = slider.locator(".widget-readout")
    status = explorer.locator(".widget-html").first
    figure = figure_of(explorer)
    expect(figure).to_be_visible()
    expect(status).to_contain_text("the classes are separated")
    expect(explorer.locator(".widget-label", has_text="arrow keys")).to_be_visible()
    centre(explorer)
    # the slider spans the explorer (a narrow one jumps over the separating window)
    track, box = slider.locator(".noUi-base").bounding_box(), explorer.bounding_box()
    assert track["width"] > 0.7 * box["width"], (track, box)
    assert_no_widget_errors(page)
    shot(page, "06_two_moons-3-ran-all")

    before = {
        "readout": readout.inner_text(),
        "status": status.inner_text(),
        "figure": figure.get_attribute("src"),
    }
    drag_slider(page, slider, 0.9)  # towards large σ: PCA-like, the moons no longer separate

    expect(readout).not_to_have_text(before["readout"])
    expect(status).not_to_have_text(before["status"])
    expect(status).not_to_contain_text("separated.")
    expect(figure).not_to_have_attribute("src", before["figure"])
    sigma = float(readout.inner_text())
    assert sigma > 3.0, f"the slider moved to σ = {sigma}"
    expect(status).to_contain_text(f"σ = {sigma:#.4g}")  # the readout's 4 significant digits
    assert_no_widget_errors(page)
    shot(page, "06_two_moons-4-slider-moved")

    # the kernel explorer further down is drawn too
    kernels = code_cell(panel, "kernel_explorer(X")
    expect(kernels.locator(".widget-dropdown select")).to_have_value("rbf")
    expect(figure_of(kernels)).to_be_visible()
    centre(kernels)
    assert_no_widget_errors(page)
    shot(page, "06_two_moons-5-kernel-explorer")


# --------------------------------------------------------------------------- scenario 2


def _sigma_exercise() -> tuple[Path, Path]:
    """The released exercise with the σ question, and its solutions notebook."""
    for path in sorted((ROOT / "exercises").glob("*.ipynb")):
        nb = nbformat.read(path, as_version=4)
        if SIGMA_QUESTION in nb.metadata.get("kpca", {}).get("questions", []):
            return path, ROOT / "solutions" / path.name
    pytest.fail(f"no notebook in exercises/ asks {SIGMA_QUESTION} (kpca metadata)")


def _answer_cell_source(saved: Path, solution_path: Path) -> str:
    """The source the grader reads for the σ question, from the saved notebook on disk."""
    from kpca_lib.course.grading.judge.notebooks import extract_answers, read_solution

    solution = read_solution(solution_path, with_hidden=False)
    submission = nbformat.read(saved, as_version=4)
    sources, notes = extract_answers(submission, solution)
    (cell_id,) = solution.answer_cells[SIGMA_QUESTION]
    assert cell_id in sources, notes
    return sources[cell_id]


def run_to_the_explorer(page, served, name: str):
    """Open the σ exercise and run it with Shift+Enter from the set-up cell down to the
    explorer's cell, as a student does; return the panel, the explorer's cell and the
    exercise and solution paths."""
    exercise, solution = _sigma_exercise()
    notebook = served.serve(exercise)
    panel = open_notebook(page, served, notebook)
    shot(page, f"{name}-1-opened")
    setup = panel.locator(".jp-CodeCell").first
    demo = code_cell(panel, "sigma_explorer(")
    setup.locator(".jp-InputPrompt").click()
    for _ in range(panel.locator(".jp-Cell").count()):
        run_cell_and_advance(page)
        wait_until_run(page)
        if re.fullmatch(r"\[\d+\]:", demo.locator(".jp-InputPrompt").text_content().strip()):
            break
    else:
        shot(page, f"{name}-1b-explorer-never-ran")
        pytest.fail("Shift+Enter from the set-up cell never ran the explorer's cell")
    assert_cells_ran_cleanly_above(panel, demo)
    return panel, demo, notebook, solution


def explorer_parts(demo):
    """The explorer of the σ exercise: (slider, readout, status line, recorder's line)."""
    explorer = demo.locator(".jp-OutputArea-output .widget-vbox").first
    slider = explorer.locator(".widget-slider")
    readout = slider.locator(".widget-readout")
    status = explorer.locator(".widget-html").first
    recorder = demo.locator(".widget-html", has_text="Copy this line").locator("code")
    return explorer, slider, readout, status, recorder


def test_exercise_sigma_answer_is_saved_for_the_grader(served, page):
    panel, demo, notebook, solution = run_to_the_explorer(page, served, "exercise_sigma")
    explorer, slider, readout, status, recorder = explorer_parts(demo)
    expect(slider.locator(".widget-label")).to_have_text("σ")
    expect(status).to_contain_text("classifies")
    expect(status).not_to_contain_text("separated.")
    expect(recorder).to_have_text(re.compile(r"^answer_sigma = "))
    figure = figure_of(explorer)
    expect(figure).to_be_visible()  # a plot, not '<Figure size ...>' text
    assert_no_widget_errors(page)
    figure_before = figure.get_attribute("src")

    # Choose σ: drag towards the separating range, then nudge with the arrow keys (the hint
    # under the slider says how) until the status line says the moons are separated (what a
    # student does).
    expect(explorer.locator(".widget-label", has_text="arrow keys")).to_be_visible()
    before = readout.inner_text()
    drag_slider(page, slider, 0.38)
    expect(readout).not_to_have_text(before)
    handle = slider.locator(".noUi-handle")
    for _ in range(40):  # one step is 0.004 decades of σ
        shown = readout.inner_text()
        sigma = float(shown)
        expect(status).to_contain_text(f"σ = {sigma:#.4g}")
        if "separated." in status.inner_text():
            break
        handle.press("ArrowLeft" if sigma > 0.21 else "ArrowRight")
        expect(readout).not_to_have_text(shown)
    expect(status).to_contain_text("the classes are separated.")
    expect(figure).not_to_have_attribute("src", figure_before)
    line = recorder.inner_text().strip()
    name, _, value = line.partition(" = ")
    # the readout and the line both show 4 significant digits
    assert name == "answer_sigma" and float(value) == pytest.approx(sigma, rel=1e-9), (line, sigma)
    centre(explorer)
    assert_no_widget_errors(page)
    shot(page, "exercise_sigma-2-chosen")

    # Copy the line into the answer cell (replacing `None`), run it and the check cell.
    answer = code_cell(panel, "answer_sigma = None")
    answer.locator(".cm-content").click()
    page.keyboard.press("Control+a")
    page.keyboard.type(line)
    expect(answer.locator(".cm-content")).to_have_text(line)
    run_cell_and_advance(page)  # the answer cell
    run_cell_and_advance(page)  # the check cell below it
    wait_until_run(page)
    check_cell = code_cell(panel, f'check("{SIGMA_QUESTION}"')
    expect(check_cell.locator(".jp-OutputArea")).to_contain_text("1 of 1 checks passed")

    # Save with Ctrl+S and wait until JupyterLab says the document is clean.
    page.keyboard.press("Control+s")
    expect(page.locator(".lm-TabBar-tab.jp-mod-dirty")).to_have_count(0)
    centre(check_cell)
    shot(page, "exercise_sigma-3-answered-and-saved")

    # What the grader reads: the answer cell's source in the saved file, re-executed.
    source = _answer_cell_source(notebook, solution)
    assert source.strip() == line
    namespace: dict = {}
    exec(compile(source, "<answer cell>", "exec"), namespace)
    assert namespace["answer_sigma"] == float(value)
    from kpca_lib.course.checks import check
    from kpca_lib.course.grading.judge.notebooks import read_solution

    question_cell = next(c for c in read_solution(solution, with_hidden=False).nb.cells
                         if c.metadata.get("kpca", {}) == {"role": "question", "question": SIGMA_QUESTION})
    exec(compile(question_cell.source, "<question cell>", "exec"), {})  # defines the question here
    os.environ["KPCA_CHECKS_RAISE"] = "1"
    try:
        check(SIGMA_QUESTION, namespace)  # raises CheckFailed when any check fails
    finally:
        del os.environ["KPCA_CHECKS_RAISE"]


# Installed on the explorer's cell before the slider moves: at every change of the page, the
# σ of the status line and of the line to copy. The slider only moves right, so a line
# older than the status line shows a smaller σ (both show 4 significant digits).
WATCH_LINE_AND_STATUS = """cell => {
  const sigma = (text, pattern) => { const m = text.match(pattern); return m ? parseFloat(m[1]) : null; };
  window.kpcaStale = [];
  window.kpcaSeen = 0;
  new MutationObserver(() => {
    const status = cell.querySelector('.widget-vbox .widget-html');
    const code = [...cell.querySelectorAll('.widget-html')]
      .filter(h => h.textContent.includes('Copy this line')).map(h => h.querySelector('code'))[0];
    if (!status || !code) return;
    const shown = sigma(status.textContent, /σ = ([0-9.]+)/);
    const line = sigma(code.textContent, /answer_sigma = ([0-9.e+-]+)/);
    window.kpcaSeen += 1;
    if (shown !== null && line !== null && line < shown)
      window.kpcaStale.push(`status σ = ${shown} while the line said ${code.textContent}`);
  }).observe(cell, {subtree: true, childList: true, characterData: true, attributes: true});
}"""


def test_recorder_keeps_up_with_a_fast_slider(served, page):
    """Many arrow-key presses in a row: the line to copy is never older than the status line,
    and once the kernel is idle it shows the readout's σ."""
    panel, demo, _, _ = run_to_the_explorer(page, served, "fast_slider")
    explorer, slider, readout, status, recorder = explorer_parts(demo)
    expect(recorder).to_have_text(re.compile(r"^answer_sigma = "))
    start = float(readout.inner_text())
    demo.evaluate(WATCH_LINE_AND_STATUS)
    handle = slider.locator(".noUi-handle")
    centre(explorer)
    handle.focus()
    presses = 30
    for _ in range(presses):  # as fast as a held-down key, far faster than the kernel redraws
        page.keyboard.press("ArrowRight")
    final = float(readout.inner_text())
    assert final > start, (start, final)
    expect(recorder).to_have_text(f"answer_sigma = {final:.4g}")
    expect(status).to_contain_text(f"σ = {final:#.4g}")
    wait_until_run(page)  # the kernel is idle: every slider message has been handled
    assert float(readout.inner_text()) == final
    assert recorder.inner_text().strip() == f"answer_sigma = {final:.4g}"
    stale = page.evaluate("window.kpcaStale")
    seen = page.evaluate("window.kpcaSeen")
    shot(page, "fast_slider-2-after")
    assert seen > 0, "the page never changed while the slider moved"
    assert stale == [], "\n".join(stale)
