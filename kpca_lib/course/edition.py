"""The student edition of the course, and the leak scan that proves it holds no answers.

``kpca-course release --student-edition DIR`` writes a folder that a class can clone and
run: the lectures (every ``notebooks/`` file), the exercises (generated from ``solutions/``
as :mod:`kpca_lib.course.release` does), the whole ``kpca_lib`` package (library, public
checks, release and grader: none of it holds an answer), the student tests listed in
``edition/tests.txt``, the set-up files (lock file, ``pyproject.toml``, ``environment.yml``,
``course.mk``, ``.gitignore``, a licence if there is one), and the student ``README.md`` and
``Makefile`` from ``edition/``. Never ``solutions/``, hidden checks, the grading secret or the
instructor's git history. The folder is marked by :data:`MARKER` (a small JSON manifest that
lists the files written), so building again over an edition replaces exactly its files;
any other non-empty folder is refused. The output is deterministic.

:func:`scan` looks in every file of a folder (notebooks as parsed JSON: sources, outputs,
metadata; zip, wheel and tar members; git objects, history included) for what must never
reach students (:func:`fingerprints`):

* ``solution``: each line of code in a ``### BEGIN SOLUTION`` region with at least
  :data:`MIN_CHARS` characters that are not white space (found inside any line, not as part
  of a longer name or number; a fragment that leaves a bracket open only as a whole line),
  every line of a one-line region (a whole answer such as ``name = value``) from
  :data:`MIN_ANSWER` characters,
  and each pair of consecutive non-blank solution lines (of any length), found as two
  consecutive non-blank lines. Lines are compared without white space, with and without
  their comment, after a prompt or markup (``>>>``, ``#``, backquotes);
* ``solution`` also: each line (from :data:`MIN_CHARS` characters) of the lectures' worked
  solutions (``python answer`` blocks of ``solutions/lectures/NN_*.md``) that its lecture
  does not hold;
* ``solution-only``: each such line of a ``solution-only`` cell (notes for the instructor);
* ``hidden-check``: each such line of a hidden-check cell except imports, the names of the
  functions it defines (as whole words) and their docstrings' lines; and, as whole words, the
  names a hidden-check cell imports from ``kpca_lib`` that no other cell and no module of the
  package uses (a hidden check's code kept in the library, which ships);
* ``secret``: the grading secret (``$KPCA_GRADING_SECRET`` and
  ``~/.config/kpca-course/grading-secret``, read only if present) and any given canary;
* ``path``: ``solutions/<a solutions notebook>``, the instructor's ``solutions`` folder as
  an absolute path, ``solutions/`` and ``### BEGIN SOLUTION`` anywhere outside
  ``kpca_lib/course/`` (whose code and docstrings describe them), and a file or folder named
  ``solutions``.

A line of a solutions notebook that also occurs outside its solution regions and hidden
checks (so in the released exercise, on purpose) is public and not a fingerprint. Lines
listed in ``edition/leak-allow.txt`` (each with its reason) are reported as allowed.
"""

from __future__ import annotations

import ast
import fnmatch
import functools
import hashlib
import io
import json
import os
import re
import shutil
import subprocess
import tarfile
import zipfile
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from pathlib import Path, PurePosixPath
from typing import Any

import nbformat

from .grading.judge.notebooks import BEGIN, END, meta
from .release import SOLUTION_GLOB, render

__all__ = [
    "MARKER",
    "MIN_CHARS",
    "EditionError",
    "Finding",
    "Fingerprints",
    "build_student_edition",
    "edition_files",
    "fingerprints",
    "grading_secrets",
    "read_tests_manifest",
    "scan",
]

#: The manifest that marks a folder as a student edition (and lists its files).
MARKER = ".kpca-edition.json"
KIND = "kpca-course student edition"
FORMAT = 1
#: A single solution line is a fingerprint from this many non-blank characters on.
MIN_CHARS = 20
#: A one-line answer (a whole solution region) is a fingerprint from this many characters on
#: (``n_out=12`` has 8; ``return K``, 7, is too common to mean anything).
MIN_ANSWER = 8
#: Secrets shorter than this are not searched for (they would match everywhere); reported.
MIN_SECRET = 8

TOP_FILES = ("requirements-lock.txt", "pyproject.toml", "environment.yml", "course.mk", ".gitignore")
#: The licences, shipped as they are: the code's (MIT) and the content's (CC BY 4.0).
LICENSES = ("LICENSE", "LICENSE.txt", "LICENSE.md", "COPYING", "LICENSE-content.md",
            "LICENSES/CC-BY-4.0.txt")
TEMPLATES = {"README.md": "edition/README.md", "Makefile": "edition/Makefile"}
TESTS_MANIFEST = "edition/tests.txt"
ALLOW_FILE = "edition/leak-allow.txt"
JUNK = {"__pycache__", ".ipynb_checkpoints", ".pytest_cache", ".ruff_cache", ".hypothesis"}
#: Folders of an edition the scan skips: the student's own environment and caches.
SCAN_SKIP = JUNK | {".venv", ".git"}
GIT_IDENTITY = ("kpca-course", "kpca-course@example.invalid")


class EditionError(Exception):
    """The edition cannot be built (or written where asked): the message says why."""


# --------------------------------------------------------------------------- building
def read_tests_manifest(path: Path) -> dict[str, list[str]]:
    """``edition/tests.txt``: ``{"student": [...], "instructor": [...]}`` (names in tests/)."""
    sections: dict[str, list[str]] = {"student": [], "instructor": []}
    current = None
    for n, raw in enumerate(Path(path).read_text(encoding="utf-8").splitlines(), 1):
        line = raw.strip()
        if not line or line.startswith("#"):
            continue
        if line.startswith("[") and line.endswith("]"):
            current = line[1:-1]
            if current not in sections:
                raise EditionError(f"{path}:{n}: unknown section {line}")
            continue
        if current is None or ".." in PurePosixPath(line).parts or line.startswith("/"):
            raise EditionError(f"{path}:{n}: {line!r} is outside a section or not a name in tests/")
        sections[current].append(line)
    return sections


def _tree(folder: Path) -> Iterator[Path]:
    """Every file under ``folder``, sorted, without caches, checkpoints and hidden files."""
    for path in sorted(folder.rglob("*")):
        rel = path.relative_to(folder).parts
        if any(part in JUNK or part.startswith(".") or part.endswith(".egg-info") for part in rel):
            continue
        if path.is_file() and not path.name.endswith((".pyc", ".pyo")):
            yield path


def _title(nb: Any) -> str:
    for cell in nb.cells:
        if cell.cell_type == "markdown" and cell.source.lstrip().startswith("#"):
            return cell.source.lstrip().splitlines()[0].lstrip("#").strip()
    return ""


def _readme(template: str, lectures: dict[str, Any], exercises: dict[str, Any]) -> str:
    """The student README: the template with ``{{lectures}}`` and ``{{exercises}}`` listed."""
    def listing(folder: str, notebooks: dict[str, Any]) -> str:
        return "\n".join(f"- [{_title(nb) or name}]({folder}/{name})" for name, nb in notebooks.items())

    return (template.replace("{{lectures}}", listing("notebooks", lectures))
            .replace("{{exercises}}", listing("exercises", exercises)))


def _answer_hashes(nb: Any) -> dict[str, str]:
    return {
        cell.id: hashlib.sha256(cell.source.encode("utf-8")).hexdigest()
        for cell in nb.cells
        if cell.cell_type == "code" and meta(cell).get("role") == "answer"
    }


#: What the student edition runs: the library (and its face data), JupyterLab and widgets,
#: the notebooks' checks, and its own `make test` and `make lint`. Not the grader's sandbox
#: filter, the Dask cluster, Playwright's browser driver or cryptography.
STUDENT_ROOTS = ("numpy", "scipy", "scikit-learn", "matplotlib", "ipywidgets", "threadpoolctl",
                 "scikit-image", "jupyterlab", "ipykernel", "nbformat", "nbclient", "nbval",
                 "pytest", "pytest-xdist", "hypothesis", "pandas", "ruff", "packaging",
                 "setuptools", "array-api-strict")


def _canonical(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


def student_lock(lock: str) -> str:
    """The student edition's lock: the lines of the instructor's ``lock`` (same versions)
    for :data:`STUDENT_ROOTS` and everything they require, as the installed packages'
    metadata says (requirements of an extra left out; one for another Python kept). Where a
    root's metadata is not installed here, the whole lock (heavier, never short of a package)."""
    from importlib import metadata

    from packaging.requirements import Requirement

    pins = {}
    for line in lock.splitlines():
        if "==" in line and not line.lstrip().startswith("#"):
            pins[_canonical(line.split("==", 1)[0].strip())] = line
    pythons = [{"python_version": v, "python_full_version": f"{v}.0"}
               for v in ("3.11", "3.12", "3.13", "3.14")]
    todo: list[tuple[str, frozenset[str]]] = [(_canonical(r), frozenset()) for r in STUDENT_ROOTS]
    seen: set[tuple[str, frozenset[str]]] = set()
    while todo:
        name, extras = todo.pop()
        if (name, extras) in seen or name not in pins:
            continue
        seen.add((name, extras))
        try:
            requires = metadata.distribution(name).requires or []
        except metadata.PackageNotFoundError:
            return lock
        for text in requires:
            req = Requirement(text)
            marker = req.marker
            # Any Python the lock serves; an extra's requirement only for an extra asked for.
            wanted = marker is None or any(
                marker.evaluate({**py, "extra": extra})
                for py in pythons for extra in (sorted(extras) or [""]))
            if wanted:
                todo.append((_canonical(req.name), frozenset(req.extras)))
    names = {name for name, _ in seen}
    return "".join(line + "\n" for key, line in pins.items() if key in names)


def edition_files(root: Path) -> dict[str, bytes]:
    """Every file of the student edition of the repository at ``root``: path -> bytes.

    Deterministic: the same repository gives the same bytes. Raises :class:`EditionError`
    when a required file is missing.
    """
    root = Path(root)
    files: dict[str, bytes] = {}
    for name in TOP_FILES:
        if not (root / name).is_file():
            raise EditionError(f"{root / name} is missing")
        files[name] = (root / name).read_bytes()
    files["requirements-lock.txt"] = student_lock(files["requirements-lock.txt"].decode()).encode()
    for name in LICENSES:
        if (root / name).is_file():
            files[name] = (root / name).read_bytes()
    lectures: dict[str, Any] = {}
    for path in _tree(root / "notebooks"):
        rel = path.relative_to(root).as_posix()
        files[rel] = path.read_bytes()
        if path.suffix == ".ipynb" and path.parent == root / "notebooks":
            lectures[path.name] = nbformat.reads(files[rel].decode("utf-8"), as_version=4)
    if not lectures:
        raise EditionError(f"no lectures in {root / 'notebooks'}")
    exercises: dict[str, Any] = {}
    answers: dict[str, dict[str, str]] = {}
    sources = sorted((root / "solutions").glob(SOLUTION_GLOB))
    if not sources:
        raise EditionError(f"no solutions notebooks ({SOLUTION_GLOB}) in {root / 'solutions'}")
    for src in sources:
        text = render(src)
        files[f"exercises/{src.name}"] = text.encode("utf-8")
        exercises[src.name] = nbformat.reads(text, as_version=4)
        answers[f"exercises/{src.name}"] = _answer_hashes(exercises[src.name])
    for path in _tree(root / "kpca_lib"):
        files[path.relative_to(root).as_posix()] = path.read_bytes()
    manifest = read_tests_manifest(root / TESTS_MANIFEST)
    for entry in manifest["student"]:
        target = root / "tests" / entry
        if entry.endswith("/"):
            found = list(_tree(target)) if target.is_dir() else []
        else:
            found = [target] if target.is_file() else []
        if not found:
            raise EditionError(f"{TESTS_MANIFEST} lists {entry}, which is not in tests/")
        for path in found:
            files[path.relative_to(root).as_posix()] = path.read_bytes()
    for name, template in TEMPLATES.items():
        text = (root / template).read_text(encoding="utf-8")
        if name == "README.md":
            text = _readme(text, lectures, exercises)
        files[name] = text.encode("utf-8")
    marker = {
        "kind": KIND,
        "format": FORMAT,
        "files": sorted(files),
        "answers": answers,
    }
    files[MARKER] = (json.dumps(marker, indent=1, sort_keys=True, ensure_ascii=False) + "\n").encode()
    return dict(sorted(files.items()))


def _previous_files(dest: Path) -> list[str] | None:
    """The files a previous edition in ``dest`` wrote, or ``None`` if it is not an edition."""
    try:
        data = json.loads((dest / MARKER).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    if not isinstance(data, dict) or data.get("kind") != KIND or not isinstance(data.get("files"), list):
        return None
    names = []
    for name in data["files"]:
        parts = PurePosixPath(name).parts if isinstance(name, str) else ("..",)
        if not parts or name.startswith("/") or ".." in parts or parts[0] == ".git":
            raise EditionError(f"{dest / MARKER} lists {name!r}: not a file of an edition; "
                               "remove the folder yourself if it is yours to remove")
        names.append(name)
    return names


def _check_destination(root: Path, dest: Path) -> list[str]:
    """The previous edition's files in ``dest`` (``[]`` if new or empty); refuse anything else."""
    real_root, real_dest = root.resolve(), dest.resolve()
    if real_dest == real_root or real_root.is_relative_to(real_dest):
        raise EditionError(f"{dest} holds the instructor's repository; choose another folder")
    if dest.is_symlink() or (dest.exists() and not dest.is_dir()):
        raise EditionError(f"{dest} is not a folder")
    if not dest.exists() or all(p.name == ".git" for p in dest.iterdir()):
        return []  # new, empty, or a fresh clone of an empty repository (its history is scanned)
    previous = _previous_files(dest)
    if previous is None:
        raise EditionError(
            f"{dest} is not empty and is not a student edition (no valid {MARKER}): "
            "nothing was written; choose a new or empty folder"
        )
    return previous


def _git(dest: Path, *args: str, env: dict[str, str] | None = None) -> str:
    proc = subprocess.run(
        ["git", "-c", "core.hooksPath=/dev/null", "-c", "commit.gpgsign=false",
         "-c", "core.autocrlf=false", "-C", str(dest), *args],
        capture_output=True, text=True, env=env,
    )
    if proc.returncode != 0:
        raise EditionError(f"git {' '.join(args)} failed in {dest}: {proc.stderr.strip()}")
    return proc.stdout


def _commit_date(root: Path) -> str:
    """``SOURCE_DATE_EPOCH``, else the instructor's last commit's time, else 2000-01-01."""
    if os.environ.get("SOURCE_DATE_EPOCH", "").isdigit():
        return os.environ["SOURCE_DATE_EPOCH"]
    try:
        out = subprocess.run(["git", "-C", str(root), "log", "-1", "--format=%ct"],
                             capture_output=True, text=True, timeout=30)
        if out.returncode == 0 and out.stdout.strip().isdigit():
            return out.stdout.strip()
    except (OSError, subprocess.SubprocessError):
        pass
    return "946684800"


def commit_edition(root: Path, dest: Path) -> bool:
    """Commit ``dest`` (a fresh repository with one commit, or one more commit); ``True`` if new."""
    name, email = GIT_IDENTITY
    date = f"@{_commit_date(root)} +0000"
    env = {**os.environ, "GIT_AUTHOR_NAME": name, "GIT_AUTHOR_EMAIL": email,
           "GIT_COMMITTER_NAME": name, "GIT_COMMITTER_EMAIL": email,
           "GIT_AUTHOR_DATE": date, "GIT_COMMITTER_DATE": date}
    fresh = not (dest / ".git").exists()
    if fresh:
        _git(dest, "init", "-q", "-b", "main")
    _git(dest, "add", "-A")
    if not fresh and not _git(dest, "status", "--porcelain").strip():
        return False
    message = "Student edition of the Kernel PCA course" if fresh else "Update the student edition"
    _git(dest, "commit", "-q", "-m", message, env=env)
    return True


def build_student_edition(root: Path, dest: Path, *, git: bool = False) -> list[str]:
    """Write the student edition of ``root`` into ``dest``; return the files written.

    ``dest`` must be new, empty (a ``.git`` alone counts as empty), or a previous student
    edition (marked by :data:`MARKER`), whose listed files are replaced; nothing else in it
    is touched. With ``git``, ``dest``
    becomes a fresh repository with one commit (or, if it is one already, gets one more).
    The leak scan is not run here: see :func:`scan` (the CLI runs both).
    """
    root, dest = Path(root), Path(dest)
    previous = _check_destination(root, dest)
    files = edition_files(root)  # everything is read before anything is written
    for name in previous:
        old = dest / name
        if old.is_symlink() or old.is_file():
            old.unlink()
    for name in sorted(previous, key=lambda n: -len(PurePosixPath(n).parts)):
        parent = (dest / name).parent
        while parent != dest and parent.is_dir() and not any(parent.iterdir()):
            parent.rmdir()
            parent = parent.parent
    dest.mkdir(parents=True, exist_ok=True)
    for name, data in files.items():
        target = dest / name
        target.parent.mkdir(parents=True, exist_ok=True)
        if target.is_symlink() or target.is_file():
            target.unlink()
        elif target.exists():
            raise EditionError(f"{target} is in the way (not a file); nothing more was written")
        target.write_bytes(data)
    if git:
        if shutil.which("git") is None:
            raise EditionError("--git needs git, which is not installed")
        commit_edition(root, dest)
    return list(files)


# --------------------------------------------------------------------------- fingerprints
def _squash(line: str) -> str:
    """A line without any white space (how lines are compared)."""
    return "".join(line.split())


def _code(line: str) -> str:
    """A line of Python without its comment (a ``#`` outside quotes)."""
    quote = ""
    for i, ch in enumerate(line):
        if quote:
            if ch == quote:
                quote = ""
        elif ch in "'\"":
            quote = ch
        elif ch == "#":
            return line[:i]
    return line


def _balanced(text: str) -> bool:
    """Whether a (squashed) line closes every bracket it opens: a statement, not a fragment."""
    depth = 0
    for ch in text:
        depth += ch in "([{"
        depth -= ch in ")]}"
        if depth < 0:
            return False
    return depth == 0


def _bare(line: str) -> str:
    """A squashed line without a leading prompt or markup (``>>>``, ``...``, ``#``, backquotes)."""
    return _squash(line).lstrip(">.#`*-")


@dataclass(frozen=True)
class Fingerprint:
    kind: str  # solution, solution-only, hidden-check, secret, path
    text: str  # squashed line(s) (pairs: "a\nb"), identifier, secret, or regex
    origin: str  # where it comes from, for the report
    match: str = "line"  # line (in a line) | exact (a whole line) | pair | word | bytes | regex


@dataclass
class Fingerprints:
    """What the scan looks for (see the module docstring), and what it may find on purpose."""

    items: list[Fingerprint] = field(default_factory=list)
    allowed: list[tuple[str, str, str]] = field(default_factory=list)  # (glob, line, reason)
    notes: list[str] = field(default_factory=list)  # e.g. a secret too short to scan for
    exempt_prefixes: tuple[str, ...] = ("kpca_lib/course/",)  # where "solutions/" is prose

    def allowed_here(self, fp: Fingerprint, name: str) -> str:
        """The reason ``fp`` may be found in the edition file ``name`` ("" if it may not)."""
        if fp.kind not in ("solution", "hidden-check") or fp.match not in ("line", "exact", "pair"):
            return ""
        reasons = []
        for part in fp.text.split("\n"):
            reason = next((r for g, line, r in self.allowed
                           if line == part and _matches(_path_of(name), g)), "")
            if not reason:
                return ""
            reasons.append(reason)
        return reasons[0]

    def counts(self) -> dict[str, int]:
        out: dict[str, int] = {}
        for fp in self.items:
            key = f"{fp.kind} ({fp.match})"
            out[key] = out.get(key, 0) + 1
        return out


def grading_secrets() -> list[str]:
    """The grader's secrets as :func:`kpca_lib.course.grading.config.grading_secret` finds them.

    Read only: unlike the grader, this never creates the secret file.
    """
    found = []
    env = os.environ.get("KPCA_GRADING_SECRET")
    if env:
        found.append(env)
    path = Path.home() / ".config" / "kpca-course" / "grading-secret"
    try:
        text = path.read_text(encoding="utf-8").strip()
    except (OSError, UnicodeDecodeError):
        text = ""
    if text:
        found.append(text)
    return found


def _regions(source: str) -> tuple[list[list[str]], list[str]]:
    """The lines of each ``### BEGIN SOLUTION`` region of a cell, and the lines outside them."""
    regions: list[list[str]] = []
    outside: list[str] = []
    current: list[str] | None = None
    for line in source.splitlines():
        if BEGIN in line:
            current = []
        elif END in line:
            if current is not None:
                regions.append(current)
            current = None
        elif current is not None:
            current.append(line)
        else:
            outside.append(line)
    return regions, outside


def _is_import(line: str) -> bool:
    s = line.strip()
    return s.startswith("import ") or (s.startswith("from ") and " import " in s)


def _read_allow(path: Path) -> list[tuple[str, str, str]]:
    """``edition/leak-allow.txt``: (path glob, squashed line, reason) for each allowed line.

    The file has sections ``[GLOB]`` (the edition files a line is allowed in), each line of
    code under it is allowed there, and the ``#`` comment above an entry is its reason.
    """
    allowed: list[tuple[str, str, str]] = []
    if not path.is_file():
        return allowed
    glob, reason, pending = None, "", []
    for n, raw in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
        line = raw.strip()
        if line.startswith("#"):
            pending.append(line.lstrip("#").strip())
        elif line.startswith("[") and line.endswith("]"):
            glob, reason, pending = line[1:-1], "", []
        elif line:
            if pending:
                reason, pending = " ".join(pending), []
            if glob is None or not reason:
                raise EditionError(f"{path}:{n}: an allowed line needs a [path] section and a # reason above it")
            allowed.append((glob, _squash(line), reason))
    return allowed


def fingerprints(
    solutions: Path, *, secrets: Iterable[str] = (), instructor_root: Path | None = None
) -> Fingerprints:
    """Everything the leak scan looks for, from ``solutions/`` and the grader's secrets.

    ``secrets`` are added to :func:`grading_secrets` (tests plant canaries this way).
    ``instructor_root`` (default: the parent of ``solutions``) gives the absolute path to
    look for and ``edition/leak-allow.txt``.
    """
    solutions = Path(solutions)
    root = Path(instructor_root) if instructor_root else solutions.parent
    fps = Fingerprints(allowed=_read_allow(root / ALLOW_FILE))
    seen: set[tuple[str, str, str]] = set()

    def add(kind: str, text: str, origin: str, match: str = "line") -> None:
        if (kind, text, match) not in seen:
            seen.add((kind, text, match))
            fps.items.append(Fingerprint(kind, text, origin, match))

    paths = sorted(solutions.glob(SOLUTION_GLOB))
    if not paths:
        raise EditionError(f"no solutions notebooks ({SOLUTION_GLOB}) in {solutions}")
    for path in paths:
        nb = nbformat.read(path, as_version=4)
        secret_lines: list[tuple[str, str, str, bool]] = []  # (kind, line, origin, whole answer)
        pairs: list[tuple[str, str, str]] = []
        public: set[str] = set()
        for index, cell in enumerate(nb.cells):
            role = meta(cell).get("role")
            origin = f"{path.name} cell {index} (id {cell.get('id')}, {role or cell.cell_type})"
            if role in ("hidden-check", "solution-only"):
                lines = [ln for ln in cell.source.splitlines() if not _is_import(ln)]
                secret_lines += [(role, ln, origin, False) for ln in lines]
                if role == "hidden-check" and cell.cell_type == "code":
                    for node in ast.walk(ast.parse(cell.source)):
                        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
                            add(role, node.name, origin, "word")
                            for doc_line in (ast.get_docstring(node) or "").splitlines():
                                secret_lines.append((role, doc_line, origin, False))
                continue
            regions, outside = _regions(cell.source)
            for region in regions:
                code = [c for c in (_squash(_code(ln)) for ln in region) if c]
                secret_lines += [("solution", ln, origin, len(code) == 1) for ln in region]
                pairs += [("solution", f"{a}\n{b}", origin) for a, b in zip(code, code[1:], strict=False)]
            public |= {_squash(ln) for ln in outside} | {_squash(_code(ln)) for ln in outside}
        for kind, line, origin, whole in secret_lines:
            texts = {_squash(line)} if kind == "solution-only" else {_squash(line), _squash(_code(line))}
            for text in texts - public - {""}:
                if whole and len(text) >= MIN_ANSWER and _balanced(text):
                    add(kind, text, origin, "line")
                elif (whole and len(text) >= MIN_ANSWER) or len(text) >= MIN_CHARS:
                    add(kind, text, origin, "line" if _balanced(text) else "exact")
        for kind, text, origin in pairs:
            if not set(text.split("\n")) <= public:
                add(kind, text, origin, "pair")
        add("path", re.escape(f"solutions/{path.stem}"), path.name, "regex")
    for name, origin in _hidden_only_helpers(paths, root / "kpca_lib").items():
        add("hidden-check", name, origin, "word")
    for kind, text, origin in _lecture_solution_lines(solutions / "lectures", root / "notebooks"):
        add(kind, text, origin, "line" if _balanced(text) else "exact")
    add("path", re.escape(str(solutions.resolve())), "the instructor's solutions folder", "regex")
    add("path", r"solutions/", "solutions/ outside kpca_lib/course/", "regex")
    add("path", r"###\s*(BEGIN|END) SOLUTION", "a solution marker outside kpca_lib/course/", "regex")
    for secret in [*grading_secrets(), *secrets]:
        if len(secret) < MIN_SECRET:
            fps.notes.append(f"a grading secret of {len(secret)} characters is too short to scan for")
        else:
            add("secret", secret, "the grading secret", "bytes")
    return fps


def _names_used(tree: ast.AST) -> set[str]:
    """Every name a module or cell reads, imports or reaches as an attribute."""
    out: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Name) and isinstance(node.ctx, ast.Load):
            out.add(node.id)
        elif isinstance(node, ast.Attribute):
            out.add(node.attr)
        elif isinstance(node, ast.alias):
            out.add((node.asname or node.name).rsplit(".", 1)[-1])
    return out


def _hidden_only_helpers(paths: Iterable[Path], package: Path) -> dict[str, str]:
    """Names that hidden-check cells import from ``kpca_lib`` and that nothing else uses (no other
    cell of ``solutions/``, no module of the package): the code of a hidden check kept in the
    library, which ships with the edition. name -> where the scan learnt it."""
    hidden: dict[str, str] = {}
    public: set[str] = set()
    for path in paths:
        for index, cell in enumerate(nbformat.read(path, as_version=4).cells):
            if cell.cell_type != "code":
                continue
            try:
                tree = ast.parse(cell.source)
            except SyntaxError:
                continue
            if meta(cell).get("role") != "hidden-check":
                public |= _names_used(tree)
                continue
            for node in ast.walk(tree):
                if isinstance(node, ast.ImportFrom) and (node.module or "").startswith("kpca_lib"):
                    for alias in node.names:
                        hidden.setdefault(alias.name, f"{path.name} cell {index} (id {cell.get('id')}, "
                                                      f"imports it from {node.module}; nothing else uses it)")
    for module in sorted(package.rglob("*.py")) if package.is_dir() else []:
        try:
            public |= _names_used(ast.parse(module.read_text(encoding="utf-8")))
        except (SyntaxError, UnicodeDecodeError):
            continue
    return {name: origin for name, origin in hidden.items() if name not in public}


def _lecture_solution_lines(folder: Path, lectures: Path) -> Iterator[tuple[str, str, str]]:
    """Lines of the lectures' worked solutions (``answer`` blocks) that their lecture lacks.

    A line of an answer block that also occurs in the lecture (the cell's check, the
    ``self_check`` call) is public; the others, from :data:`MIN_CHARS` characters, are
    fingerprints of kind ``solution``.
    """
    from .lecture_checks import parse_solutions

    for path in sorted(folder.glob("[0-9][0-9]_*.md")) if folder.is_dir() else []:
        public: set[str] = set()
        lecture = lectures / f"{path.stem}.ipynb"
        if lecture.is_file():
            for cell in nbformat.read(lecture, as_version=4).cells:
                lines = cell.source.splitlines()
                public |= {_squash(ln) for ln in lines} | {_squash(_code(ln)) for ln in lines}
        for number, section in parse_solutions(path.read_text(encoding="utf-8")).items():
            for line in "".join(section.answer).splitlines():
                for text in {_squash(line), _squash(_code(line))} - public - {""}:
                    if len(text) >= MIN_CHARS:
                        yield "solution", text, f"lectures/{path.name} exercise {number}"


# --------------------------------------------------------------------------- scanning
@dataclass(frozen=True)
class Finding:
    """One leak: in which file (and where in it), of what kind, from where, and the text."""

    file: str
    where: str
    kind: str
    origin: str
    excerpt: str
    allowed: str = ""  # the reason from edition/leak-allow.txt, if the line is allowed

    def __str__(self) -> str:
        if self.allowed:
            return f"allowed {self.kind}: {self.file}:{self.where}: {self.excerpt!r}"
        return f"LEAK {self.kind}: {self.file}:{self.where}: {self.excerpt!r}  [from {self.origin}]"


def _strings(value: Any, pointer: str) -> Iterator[tuple[str, str]]:
    """(JSON pointer, text) of every string in parsed JSON; lists of strings joined (nbformat)."""
    if isinstance(value, str):
        yield pointer, value
    elif isinstance(value, list):
        if value and all(isinstance(v, str) for v in value):
            yield pointer, "".join(value)
        else:
            for i, v in enumerate(value):
                yield from _strings(v, f"{pointer}/{i}")
    elif isinstance(value, dict):
        for k, v in value.items():
            yield f"{pointer}/{k}#key", str(k)
            if isinstance(k, str) and k.startswith("image/") and k != "image/svg+xml":
                continue  # base64 pixels (the secret is still searched for in the raw bytes)
            yield from _strings(v, f"{pointer}/{k}")


def _segments(name: str, data: bytes) -> Iterator[tuple[str, str]]:
    """(location prefix, text) pieces of a file to match lines in."""
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError:
        return
    if name.endswith((".ipynb", ".json")) or text.lstrip().startswith("{"):
        try:
            parsed = json.loads(text)
        except ValueError:
            parsed = None
        if parsed is not None:
            yield from ((f"{p or '/'} line ", s) for p, s in _strings(parsed, ""))
            return
    yield "line ", text


def _archive_members(data: bytes) -> Iterator[tuple[str, bytes]] | None:
    if data[:4] == b"PK\x03\x04":
        try:
            zf = zipfile.ZipFile(io.BytesIO(data))
        except zipfile.BadZipFile:
            return None
        return ((info.filename, zf.read(info)) for info in zf.infolist() if not info.is_dir())
    try:
        tf = tarfile.open(fileobj=io.BytesIO(data))
    except (tarfile.TarError, OSError, EOFError):
        return None

    def members() -> Iterator[tuple[str, bytes]]:
        for info in tf.getmembers():
            fh = tf.extractfile(info) if info.isfile() else None
            if fh is not None:
                yield info.name, fh.read()

    return members()


def _matches(path: str, glob: str) -> bool:
    """``path`` matches ``glob``, also inside an archive's top folder (an sdist's)."""
    return fnmatch.fnmatchcase(path, glob) or fnmatch.fnmatchcase(path, f"*/{glob}")


@functools.lru_cache(maxsize=1024)
def _pattern(text: str, bounded: bool) -> re.Pattern[str]:
    """``text`` as a regex, or (``bounded``) literally, not inside a longer name or number."""
    if not bounded:
        return re.compile(text)
    before = r"(?<!\w)" if re.match(r"\w", text) else ""
    after = r"(?![\w.])" if re.search(r"\w$", text) else ""
    return re.compile(before + re.escape(text) + after)


def _path_of(name: str) -> str:
    """The path in the edition of a scanned name: ``.git/<sha>:PATH``, ``ARCHIVE!PATH``, PATH."""
    if name.startswith(".git/"):
        name = name.split(":", 1)[-1]
    return name.split("!")[-1]


def _path_hits(name: str, fps: Fingerprints) -> list[Finding]:
    parts = PurePosixPath(_path_of(name)).parts
    if "solutions" in parts or any(p.startswith("solutions.") for p in parts):
        return [Finding(name, "(its path)", "path", "a file or folder named solutions", name)]
    return []


def _scan_data(name: str, data: bytes, fps: Fingerprints, depth: int = 0) -> list[Finding]:
    found = _path_hits(name, fps)
    for fp in fps.items:
        if fp.match == "bytes" and fp.text.encode("utf-8") in data:
            found.append(Finding(name, "(bytes)", fp.kind, fp.origin, "<the secret>"))
    members = _archive_members(data) if depth < 3 else None
    if members is not None:
        for member, content in members:
            found += _scan_data(f"{name}!{member}", content, fps, depth + 1)
        return found
    exempt = any(f"/{prefix}" in f"/{_path_of(name)}" for prefix in fps.exempt_prefixes)
    for prefix, text in _segments(name, data):
        found += _scan_text(name, prefix, text, fps, exempt)
    return found


def _scan_text(name: str, prefix: str, text: str, fps: Fingerprints, exempt: bool) -> list[Finding]:
    lines = text.splitlines() or [""]
    squashed = [_squash(ln) for ln in lines]
    joined = "\n".join(squashed)
    whole: dict[str, list[int]] = {}  # a line as compared whole (bare, with or without comment)
    for i, line in enumerate(lines):
        for form in {_bare(line), _bare(_code(line))} - {""}:
            whole.setdefault(form, []).append(i)
    nonblank = [i for i, s in enumerate(squashed) if s]
    following = dict(zip(nonblank, nonblank[1:], strict=False))
    found = []

    secrets = [fp.text for fp in fps.items if fp.match == "bytes"]

    def hit(i: int, fp: Fingerprint) -> None:
        excerpt = lines[i].strip()[:160]
        for secret in secrets:  # a report never shows a secret
            excerpt = excerpt.replace(secret, "<the secret>")
        found.append(Finding(name, f"{prefix}{i + 1}", fp.kind, fp.origin, excerpt, fps.allowed_here(fp, name)))

    for fp in fps.items:
        if fp.match == "line":
            if fp.text in joined:
                pattern = _pattern(fp.text, True)
                for i, s in enumerate(squashed):
                    if fp.text in s and pattern.search(s):
                        hit(i, fp)
        elif fp.match == "exact":
            for i in whole.get(fp.text, []):
                hit(i, fp)
        elif fp.match == "pair":
            a, b = fp.text.split("\n")
            for i in whole.get(a, []):
                j = following.get(i)
                if j is not None and j in whole.get(b, []):
                    hit(i, fp)
        elif fp.match == "word":
            pattern = _pattern(fp.text, True)
            for i, line in enumerate(lines):
                if pattern.search(line):
                    hit(i, fp)
        elif fp.match == "regex":
            if exempt and fp.origin.endswith("outside kpca_lib/course/"):
                continue
            pattern = _pattern(fp.text, False)
            for i, line in enumerate(lines):
                if pattern.search(line):
                    hit(i, fp)
    return sorted(set(found), key=lambda f: (int(f.where.rsplit(" ", 1)[-1]), f.kind, f.origin))


def _git_out(folder: Path, *args: str) -> bytes:
    proc = subprocess.run(["git", "-C", str(folder), *args], capture_output=True)
    if proc.returncode != 0:
        raise EditionError(f"cannot read the git objects of {folder}: {proc.stderr.decode().strip()}")
    return proc.stdout


def _git_objects(folder: Path, exempt: tuple[str, ...]) -> Iterator[tuple[str, bytes]]:
    """Every object of the repository in ``folder`` (blobs, commits, tags), history included.

    A blob is named ``.git/<sha>:<path>`` after a path it has in some commit (one outside
    the ``exempt`` prefixes if there is one), so the scan's rules by path apply to it.
    """
    paths: dict[str, set[str]] = {}
    for commit in _git_out(folder, "rev-list", "--all").decode().split():
        for entry in _git_out(folder, "ls-tree", "-r", "-z", "--full-tree", commit).split(b"\0"):
            if entry:
                info, _, path = entry.decode("utf-8", "replace").partition("\t")
                paths.setdefault(info.split()[2], set()).add(path)
    for path in sorted({p for ps in paths.values() for p in ps}):
        yield f".git/history:{path}", b""
    out, pos = _git_out(folder, "cat-file", "--batch-all-objects", "--batch"), 0
    while pos < len(out):
        end = out.index(b"\n", pos)
        sha, kind, size = out[pos:end].decode().split()
        start = end + 1
        content = out[start : start + int(size)]
        pos = start + int(size) + 1
        if kind in ("blob", "commit", "tag"):
            names = sorted(paths.get(sha, {f"({kind})"}),
                           key=lambda n: (any(n.startswith(e) for e in exempt), n))
            yield f".git/{sha[:12]}:{names[0]}", content


def scan(target: Path, fps: Fingerprints) -> list[Finding]:
    """Every finding in ``target`` (a folder, recursively, or one file or archive).

    A folder's ``.venv`` and caches are skipped; its ``.git``, if any, is read with git
    (every object, so earlier commits too). Findings with ``allowed`` set are expected.
    """
    target = Path(target)
    if target.is_file():
        return _scan_data(target.name, target.read_bytes(), fps)
    found: list[Finding] = []
    for path in sorted(target.rglob("*")):
        rel = path.relative_to(target)
        if any(part in SCAN_SKIP for part in rel.parts):
            continue
        if path.is_symlink():
            found.append(Finding(rel.as_posix(), "(symlink)", "path", "a symbolic link",
                                 os.readlink(path)))
        elif path.is_file():
            found += _scan_data(rel.as_posix(), path.read_bytes(), fps)
        elif path.is_dir():
            found += _path_hits(rel.as_posix(), fps)
    if (target / ".git").exists():
        for name, content in _git_objects(target, fps.exempt_prefixes):
            found += _scan_data(name, content, fps)
    return found
