"""The student edition: complete, deterministic, safe to regenerate, and without leaks.

(Its own ``make test`` from a fresh .venv runs in ``make test-student-edition``.)
"""

from __future__ import annotations

import ast
import copy
import io
import json
import shutil
import subprocess
import zipfile
from pathlib import Path

import nbformat
import pytest
from test_docs import broken_links
from test_exercises_run import _digest, execute, problems

from kpca_lib.course.cli import main
from kpca_lib.course.edition import (
    MARKER,
    EditionError,
    build_student_edition,
    fingerprints,
    read_tests_manifest,
    scan,
)
from kpca_lib.course.grading.judge.notebooks import meta

ROOT = Path(__file__).resolve().parents[1]
SOLUTIONS = ROOT / "solutions"
CANARY = "kpca-canary-8f3d0c1e-secret"


def _tree(folder: Path) -> dict[str, bytes]:
    return {
        p.relative_to(folder).as_posix(): p.read_bytes()
        for p in sorted(folder.rglob("*"))
        if p.is_file() and ".git" not in p.relative_to(folder).parts
    }


@pytest.fixture(scope="module")
def edition(tmp_path_factory) -> Path:
    dest = tmp_path_factory.mktemp("edition") / "student"
    build_student_edition(ROOT, dest)
    return dest


@pytest.fixture(scope="module")
def fps():
    return fingerprints(SOLUTIONS)


def test_every_test_file_is_classified():
    manifest = read_tests_manifest(ROOT / "edition" / "tests.txt")
    entries = manifest["student"] + manifest["instructor"]
    assert len(entries) == len(set(entries)), "a file is listed twice in edition/tests.txt"
    for entry in entries:
        assert (ROOT / "tests" / entry).exists(), f"edition/tests.txt lists {entry}, not in tests/"
    files = [
        p.relative_to(ROOT / "tests").as_posix()
        for p in (ROOT / "tests").rglob("*")
        if p.is_file() and "__pycache__" not in p.parts
    ]
    for name in files:
        owners = [e for e in entries if name == e or (e.endswith("/") and name.startswith(e))]
        assert len(owners) == 1, (
            f"tests/{name} must be listed once in edition/tests.txt, under [student] (shipped to "
            f"students) or [instructor]; found {owners}"
        )


def test_edition_holds_what_students_need(edition):
    files = _tree(edition)
    lectures = {f"notebooks/{p.name}" for p in (ROOT / "notebooks").glob("*.ipynb")}
    exercises = {f"exercises/{p.name}" for p in SOLUTIONS.glob("[0-9][0-9]_*.ipynb")}
    library = {p.relative_to(ROOT).as_posix() for p in (ROOT / "kpca_lib").rglob("*.py")}
    student_tests = {
        f"tests/{n}" for n in read_tests_manifest(ROOT / "edition/tests.txt")["student"]
    }
    top = {
        "README.md",
        "Makefile",
        "course.mk",
        "requirements-lock.txt",
        "pyproject.toml",
        "environment.yml",
        ".gitignore",
        MARKER,
    }
    licences = {"LICENSE", "LICENSE-content.md", "LICENSES/CC-BY-4.0.txt"}  # code and content
    assert (
        lectures and set(files) == top | licences | lectures | exercises | library | student_tests
    )
    assert json.loads(files[MARKER])["files"] == sorted(set(files) - {MARKER})
    # Its own lock: the instructor's lines (same versions) for what students run, and no
    # grader, cluster or browser driver.
    ours = (ROOT / "requirements-lock.txt").read_text().splitlines()
    theirs = files["requirements-lock.txt"].decode().splitlines()
    assert set(theirs) < set(ours) and theirs == [line for line in ours if line in theirs]
    names = {line.split("==")[0].lower() for line in theirs}
    assert {"jupyterlab", "nbval", "pytest", "scikit-learn", "ruff", "jsonschema"} <= names
    assert not names & {"playwright", "dask", "distributed", "pyseccomp", "cryptography"}
    for name in exercises | lectures | licences | {"pyproject.toml", "course.mk"}:
        assert files[name] == (ROOT / name).read_bytes(), f"{name} differs from the repository's"
    makefile, readme = files["Makefile"].decode(), files["README.md"].decode()
    assert "include course.mk" in makefile and "\ntest:" in makefile
    assert "solutions" not in makefile and "browser" not in makefile and "release" not in makefile
    for needed in (
        "make lab",
        "make check",
        "make test",
        "## Submitting",
        "exercises/NN_name.ipynb",
        "nbgitpuller",
    ):
        assert needed in readme, needed
    assert "{{" not in readme and "solutions" not in readme.lower()
    for name in lectures | exercises:
        assert f"]({name})" in readme, f"the student README does not list {name}"


def test_student_readme_links_resolve_in_the_edition(edition):
    """Every relative link of the student README goes to a file of the edition: the
    instructor's reference pages (docs/) are not in it, so it must not link to them."""
    assert broken_links(edition / "README.md", edition) == []
    assert not (edition / "docs").exists()


def _kernel_managers_over_tcp(tree: ast.AST) -> list[int]:
    """Lines of a test module that start a Jupyter kernel over TCP, the default: a
    ``NotebookClient`` given neither a configuration (``config=``, which can set
    ``KernelManager.transport = "ipc"``) nor a kernel manager (``km=``), or a ``KernelManager``
    without ``transport="ipc"`` (one only asked for its command line, ``.format_kernel_cmd()``,
    starts nothing)."""
    only_cmd = {
        id(node.value)
        for node in ast.walk(tree)
        if isinstance(node, ast.Attribute) and node.attr == "format_kernel_cmd"
    }
    lines = []
    for call in ast.walk(tree):
        if not isinstance(call, ast.Call):
            continue
        name = getattr(call.func, "id", getattr(call.func, "attr", None))
        keywords = {k.arg: k.value for k in call.keywords}
        if name == "NotebookClient" and not {"km", "config"} & set(keywords):
            lines.append(call.lineno)
        if name == "KernelManager" and id(call) not in only_cmd:
            transport = keywords.get("transport")
            if not (isinstance(transport, ast.Constant) and transport.value == "ipc"):
                lines.append(call.lineno)
    return sorted(lines)


def test_student_make_test_prints_no_warnings(edition):
    """A green ``make test`` of the edition prints no warning and no kernel notice.

    Its two pytest runs (the tests, then the lectures under nbval) turn warnings into errors,
    so a warning fails the test that caused it, by name (a warning a test expects, it asserts).
    The kernels its tests start use IPC sockets, as ``make check`` does: ipykernel prints
    "Kernel is running over TCP without encryption" to the stderr of every TCP kernel (nbval's
    own kernels write their stderr to /dev/null). The whole run: ``make test-student-edition``.
    """
    makefile = (edition / "Makefile").read_text(encoding="utf-8")
    recipe = makefile.split("\ntest:", 1)[1].split("\n\n", 1)[0]
    runs = [line.strip() for line in recipe.splitlines() if line.startswith("\t")]
    assert [r.split()[0] for r in runs] == ["$(PYTEST)", "$(NBVAL)"], runs
    assert all(" -W error " in f" {r} " for r in runs), runs
    tests = sorted((edition / "tests").rglob("*.py"))
    assert any("NotebookClient" in p.read_text(encoding="utf-8") for p in tests)
    for path in tests:
        tcp = _kernel_managers_over_tcp(ast.parse(path.read_text(encoding="utf-8")))
        assert not tcp, (
            f"tests/{path.name}, line(s) {tcp}: a kernel over TCP; run notebooks "
            "with test_exercises_run.run_in_local_kernel (IPC)"
        )


def test_kernel_managers_over_tcp_are_found():
    code = (
        "NotebookClient(nb, kernel_name='python3').execute()\n"
        "NotebookClient(nb, config=ipc).execute()\n"
        "km = KernelManager(kernel_name='python3')\n"
        "km = KernelManager(kernel_name='python3', transport='ipc', ip='/tmp/k')\n"
        "cmd = KernelManager(kernel_name='python3').format_kernel_cmd()\n"
    )
    assert _kernel_managers_over_tcp(ast.parse(code)) == [1, 3]


def test_edition_is_deterministic_and_regenerates_over_itself(edition, tmp_path):
    again = tmp_path / "again"
    build_student_edition(ROOT, again)
    assert _tree(again) == _tree(edition)
    (again / "notes.txt").write_text("the instructor's own notes\n")  # not the edition's
    marker = json.loads((again / MARKER).read_text())
    marker["files"].append("notebooks/99_removed_since.ipynb")
    (again / MARKER).write_text(json.dumps(marker))
    (again / "notebooks/99_removed_since.ipynb").write_text("{}")
    (again / "README.md").write_text("edited")
    build_student_edition(ROOT, again)
    assert not (again / "notebooks/99_removed_since.ipynb").exists()
    assert (again / "notes.txt").read_text() == "the instructor's own notes\n"
    (again / "notes.txt").unlink()
    assert _tree(again) == _tree(edition)


def _previous_is_none(folder: Path) -> bool:
    from kpca_lib.course.edition import _check_destination

    return _check_destination(ROOT, folder) == []


def test_refuses_a_folder_that_is_not_an_edition(tmp_path, capsys):
    mine = tmp_path / "mine"
    mine.mkdir()
    (mine / "thesis.tex").write_text("mine")
    with pytest.raises(EditionError, match="not a student edition"):
        build_student_edition(ROOT, mine)
    assert [p.name for p in mine.iterdir()] == ["thesis.tex"]
    assert main(["release", "--student-edition", str(mine)]) == 2
    assert "not a student edition" in capsys.readouterr().err
    fresh_clone = tmp_path / "clone"
    (fresh_clone / ".git").mkdir(parents=True)
    assert _previous_is_none(fresh_clone)
    for inside_out in (ROOT, ROOT.parent):
        with pytest.raises(EditionError, match="instructor's repository"):
            build_student_edition(ROOT, inside_out)
    (mine / MARKER).write_text(
        json.dumps({"kind": "kpca-course student edition", "files": ["../x"]})
    )
    with pytest.raises(EditionError, match="not a file of an edition"):
        build_student_edition(ROOT, mine)
    assert (mine / "thesis.tex").read_text() == "mine"


@pytest.mark.skipif(shutil.which("git") is None, reason="needs git")
def test_git_edition_is_one_commit_without_history(tmp_path, capsys):
    dest = tmp_path / "published"
    assert main(["release", "--student-edition", str(dest), "--git"]) == 0, capsys.readouterr().err
    git = ["git", "-C", str(dest)]
    assert (
        subprocess.run(
            [*git, "rev-list", "--count", "HEAD"], capture_output=True, text=True
        ).stdout.strip()
        == "1"
    )
    tracked = subprocess.run([*git, "ls-files"], capture_output=True, text=True).stdout.split()
    assert sorted(tracked) == sorted(_tree(dest))
    head = subprocess.run([*git, "rev-parse", "HEAD"], capture_output=True, text=True).stdout
    assert main(["release", "--student-edition", str(dest), "--git"]) == 0
    assert "nothing changed" in capsys.readouterr().out
    assert (
        subprocess.run([*git, "rev-parse", "HEAD"], capture_output=True, text=True).stdout == head
    )
    # an older edition (here: another README) is updated by one more commit
    (dest / "README.md").write_text("an older edition\n")
    subprocess.run(
        [*git, "-c", "user.name=t", "-c", "user.email=t@t", "commit", "-qam", "old"], check=True
    )
    assert main(["release", "--student-edition", str(dest), "--git"]) == 0
    assert (
        subprocess.run(
            [*git, "rev-list", "--count", "HEAD"], capture_output=True, text=True
        ).stdout.strip()
        == "3"
    )
    assert not subprocess.run(
        [*git, "status", "--porcelain"], capture_output=True, text=True
    ).stdout


def test_the_real_edition_has_no_leak(edition, fps):
    findings = scan(edition, fps)
    leaks = [str(f) for f in findings if not f.allowed]
    assert not leaks, "\n".join(leaks)
    # what is allowed is few and named in edition/leak-allow.txt
    assert len(findings) <= 10, "\n".join(map(str, findings))
    assert {fp.kind for fp in fps.items} >= {"solution", "solution-only", "hidden-check", "path"}


def _first(fps, kind: str, match: str) -> str:
    allowed = {line for _, line, _ in fps.allowed}
    singles = {fp.text for fp in fps.items if fp.match in ("line", "exact")}
    return next(
        fp.text
        for fp in fps.items
        if fp.kind == kind
        and fp.match == match
        and not set(fp.text.split("\n")) & allowed
        # a pair of lines that are not fingerprints on their own: only the pair rule finds it
        and (match != "pair" or not any(s in part for s in singles for part in fp.text.split("\n")))
    )


def test_scan_finds_every_kind_of_planted_leak(edition, tmp_path, monkeypatch):
    home = tmp_path / "home"
    (home / ".config" / "kpca-course").mkdir(parents=True)
    (home / ".config" / "kpca-course" / "grading-secret").write_text("file-secret-3c9a7b1d\n")
    monkeypatch.setenv("HOME", str(home))
    monkeypatch.setenv("KPCA_GRADING_SECRET", "env-secret-77e1f0aa")
    fps = fingerprints(SOLUTIONS, secrets=[CANARY])
    dest = tmp_path / "leaky"
    shutil.copytree(edition, dest)
    line = _first(fps, "solution", "line")
    exact = _first(fps, "solution", "exact")
    a, b = _first(fps, "solution", "pair").split("\n")
    hidden_line = _first(fps, "hidden-check", "line")
    hidden_name = _first(fps, "hidden-check", "word")
    notes = _first(fps, "solution-only", "line")
    # in a lecture: a cell's output, a cell's metadata and a markdown cell
    lecture = sorted((dest / "notebooks").glob("*.ipynb"))[0]
    nb = nbformat.read(lecture, as_version=4)
    code = next(c for c in nb.cells if c.cell_type == "code")
    code.outputs.append(nbformat.v4.new_output("stream", name="stdout", text=f"   {line}\n"))
    code.metadata["note"] = f"see {hidden_name} here"
    nb.cells.append(nbformat.v4.new_markdown_cell(f"Solution notes, copied:\n{notes}"))
    nb.cells.append(nbformat.v4.new_code_cell("### BEGIN SOLUTION\nx = 1\n### END SOLUTION"))
    nbformat.write(nb, lecture)
    (dest / "tests" / "test_pair.py").write_text(f"def f():\n    {a}  # short\n\n    {b}\n")
    (dest / "README.md").write_text(f"Hint:\n\n    {exact}\n\nsee solutions/03_mercer.ipynb\n")
    (dest / "kpca_lib" / "hint.py").write_text(f"# {hidden_line} env-secret-77e1f0aa\n")
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w") as zf:
        zf.writestr("inner/secret.txt", "file-secret-3c9a7b1d")
        zf.writestr("inner/canary.txt", CANARY)
    (dest / "extra.zip").write_bytes(buf.getvalue())
    (dest / "solutions").mkdir()
    (dest / "solutions" / "empty.txt").write_text("")
    found = {
        (f.kind, f.file.split("!")[0], f.where.split(" line ")[0])
        for f in scan(dest, fps)
        if not f.allowed
    }
    rel = f"notebooks/{lecture.name}"
    expected = {
        ("solution", rel, f"/cells/{nb.cells.index(code)}/outputs/{len(code.outputs) - 1}/text"),
        ("hidden-check", rel, f"/cells/{nb.cells.index(code)}/metadata/note"),
        ("solution-only", rel, f"/cells/{len(nb.cells) - 2}/source"),
        ("path", rel, f"/cells/{len(nb.cells) - 1}/source"),
        ("solution", "tests/test_pair.py", "line"),
        ("solution", "README.md", "line"),
        ("path", "README.md", "line"),
        ("hidden-check", "kpca_lib/hint.py", "line"),
        ("secret", "kpca_lib/hint.py", "(bytes)"),
        ("secret", "extra.zip", "(bytes)"),
        ("path", "solutions", "(its path)"),
    }
    missing = {
        e
        for e in expected
        if not any(e[0] == f[0] and e[1] == f[1] and f[2].startswith(e[2]) for f in found)
    }
    assert not missing, f"not found: {missing}\nfound: {sorted(found)}"
    findings = scan(dest, fps)
    assert {f.file for f in findings if f.kind == "secret"} >= {
        "kpca_lib/hint.py",
        "extra.zip!inner/secret.txt",
        "extra.zip!inner/canary.txt",
    }
    assert all("secret-" not in str(f) for f in findings)  # a report never shows a secret


def test_the_lectures_worked_solutions_are_fingerprints(tmp_path):
    root = tmp_path / "course"
    shutil.copytree(SOLUTIONS, root / "solutions", ignore=shutil.ignore_patterns("lectures"))
    (root / "notebooks").mkdir()
    lecture = nbformat.v4.new_notebook()
    check = "def check_2(f):\n    assert np.allclose(f(np.ones(3)), 2.0), 'twice the input'\n"
    lecture.cells.append(nbformat.v4.new_code_cell(f"{check}\nself_check(2, double, check_2)"))
    nbformat.write(lecture, root / "notebooks" / "05_x.ipynb")
    (root / "solutions" / "lectures").mkdir()
    answer = "def double(x):\n    return np.multiply(2.0, np.asarray(x))\n"
    (root / "solutions" / "lectures" / "05_x.md").write_text(
        f"## Exercise 2\nWhy.\n\n```python answer\n{answer}\n{check}\nself_check(2, double, check_2)\n```\n"
    )
    fps = fingerprints(root / "solutions")
    ours = {fp.text for fp in fps.items if fp.origin == "lectures/05_x.md exercise 2"}
    assert ours == {"returnnp.multiply(2.0,np.asarray(x))"}  # the check and the call are public
    dest = tmp_path / "edition"
    dest.mkdir()
    (dest / "README.md").write_text("Hint:    return np.multiply(2.0, np.asarray(x))\n")
    assert [(f.kind, f.file) for f in scan(dest, fps) if not f.allowed] == [("solution", "README.md")]


@pytest.mark.skipif(shutil.which("git") is None, reason="needs git")
def test_scan_reads_git_history_and_the_cli_fails_loudly(edition, fps, tmp_path, capsys):
    dest = tmp_path / "repo"
    shutil.copytree(edition, dest)
    line = _first(fps, "solution", "line")
    run = [
        "git",
        "-C",
        str(dest),
        "-c",
        "user.name=t",
        "-c",
        "user.email=t@t",
        "-c",
        "commit.gpgsign=false",
    ]
    subprocess.run([*run, "init", "-q"], check=True)
    (dest / "leak.py").write_text(line + "\n")
    subprocess.run([*run, "add", "-A"], check=True)
    subprocess.run([*run, "commit", "-qm", "oops"], check=True)
    (dest / "leak.py").unlink()
    subprocess.run([*run, "commit", "-qam", "remove the leak (it stays in history)"], check=True)
    assert [f for f in scan(dest, fps) if not f.allowed and f.file.startswith(".git/")]
    assert main(["scan", str(dest)]) == 1
    err = capsys.readouterr().err
    assert "LEAK SCAN FAILED" in err and ":leak.py:line 1" in err
    assert main(["scan", "--secret", CANARY, str(edition)]) == 0


# --------------------------------------------------------------------------- the exercise test
def _filled(path: Path):
    """The released exercise with every answer cell taken from solutions/."""
    nb = nbformat.read(ROOT / "exercises" / path.name, as_version=4)
    released = {c.id: _digest(c.source) for c in nb.cells if meta(c).get("role") == "answer"}
    solution = {c.id: c.source for c in nbformat.read(path, as_version=4).cells}
    for cell in nb.cells:
        if cell.id in released:
            cell.source = solution[cell.id]
    return nb, released


@pytest.mark.parametrize("path", sorted(SOLUTIONS.glob("[0-9][0-9]_*.ipynb")), ids=lambda p: p.stem)
def test_exercise_test_passes_for_the_solutions_answers(path):
    nb, released = _filled(path)
    execute(nb, ROOT / "exercises")
    assert problems(nb, released) == []
    errors = [o for c in nb.cells for o in c.get("outputs", []) if o.output_type == "error"]
    assert not errors, errors


def _executed(cells):
    nb = nbformat.v4.new_notebook()
    for role, source, ename in cells:
        cell = nbformat.v4.new_code_cell(source)
        cell.metadata["kpca"] = {"role": role, "question": "q"} if role else {}
        report = "q: 0 of 2 checks passed\n  ✘ x\n" if role == "check" else ""
        cell.outputs = [nbformat.v4.new_output("stream", name="stdout", text=report)]
        if ename:
            cell.outputs.append(
                nbformat.v4.new_output("error", ename=ename, evalue="e", traceback=[])
            )
        nb.cells.append(cell)
    return nb


def test_exercise_test_rules():
    blank = [
        ("setup", "import numpy", None),
        ("answer", "raise NotImplementedError", "NotImplementedError"),
        ("check", "check('q', globals())", "CheckFailed"),
    ]
    nb = _executed(blank)
    released = {nb.cells[1].id: _digest(nb.cells[1].source)}
    assert problems(nb, released) == []
    started = copy.deepcopy(nb)
    started.cells[1].source = "def f(): return 1"
    started.cells[1].outputs = []
    assert problems(started, released) == [
        "q: your answer does not pass its check yet (CheckFailed: e); run the exercise in "
        "JupyterLab to see the check's report"
    ]
    started.cells[2].outputs = started.cells[2].outputs[:1]  # the check passes
    assert problems(started, released) == []
    started.cells[0].outputs.append(
        nbformat.v4.new_output("error", ename="NameError", evalue="x", traceback=[])
    )
    assert problems(started, released)[0].endswith("(setup) raised NameError: x")
    passing_blank = copy.deepcopy(nb)
    passing_blank.cells[2].outputs = passing_blank.cells[2].outputs[:1]
    assert "passed on a blank answer" in problems(passing_blank, released)[0]
    del nb.cells[1]
    assert "is missing" in problems(nb, released)[0]
