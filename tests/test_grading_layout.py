"""The grader's house: its rooms and the doors between them, read from the code's own imports.

``kpca_lib/course/grading/`` is cut by stage (see CONTRIBUTING.md, "The grader's house"):
``run`` executes untrusted notebooks, ``judge`` scores plain data, ``record`` keeps the
instructor's files, ``handback`` writes what people read; ``pipeline`` (the chain of steps)
sits above them, and two leaves serve every room: ``config`` (what a batch is graded with)
and ``text`` (text a submission controls, made safe to show). The rules, from every ``import``
in every module (those inside functions too):

* a room imports only the rooms it may (``ALLOWED``): ``judge``, ``record`` and ``handback``
  never import ``run``; nothing below imports ``pipeline``;
* no circle between modules;
* no function of ``grading/`` is longer than 80 lines or takes more than 8 parameters
  (the public ``grade_batch`` keeps its keyword signature as a thin wrapper).
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
PACKAGE = "kpca_lib.course.grading"
GRADING = ROOT / "kpca_lib" / "course" / "grading"
ROOMS = ("run", "judge", "record", "handback")
# What each part of grading/ may import from grading/ (the library and other course modules
# are not rooms).
# ``text`` (the escaping of text a submission controls) is a leaf every part may use.
ALLOWED = {
    "run": {"run", "judge", "config", "text"},
    "judge": {"judge", "text"},
    "record": {"record", "judge", "text"},
    "handback": {"handback", "record", "judge", "text"},
    "config": {"text"},
    "text": set(),
    "pipeline": {"run", "judge", "record", "handback", "config", "pipeline", "text"},
    "": set(),  # grading/__init__.py
}
MAX_LINES = 80
MAX_PARAMETERS = 8
THIN_WRAPPERS = {f"{PACKAGE}.pipeline.grade_batch"}  # the public keyword signature


def module_name(path: Path, top: Path, package: str) -> str:
    parts = list(path.relative_to(top).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts = parts[:-1]
    return ".".join([package, *parts])


def imports_of(source: str, name: str, is_package: bool, known: set[str]) -> set[str]:
    """The modules of ``known`` that ``source`` (module ``name``) imports, anywhere in it."""
    found: set[str] = set()
    here = name.split(".") if is_package else name.split(".")[:-1]
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Import):
            targets = [a.name for a in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = here[: len(here) - node.level + 1] if node.level else []
            stem = ".".join([*base, *([node.module] if node.module else [])])
            # ``from .room import module`` imports that module; ``from .module import name``
            # imports the module
            targets = [f"{stem}.{a.name}" if f"{stem}.{a.name}" in known else stem
                       for a in node.names]
        else:
            continue
        for target in targets:
            while target and target not in known:  # a name imported from a module: the module
                target = target.rpartition(".")[0]
            if target:
                found.add(target)
    return found - {name}


def import_graph(top: Path, package: str) -> dict[str, set[str]]:
    paths = {module_name(p, top, package): p for p in sorted(top.rglob("*.py"))}
    known = set(paths)
    return {m: imports_of(p.read_text(), m, p.name == "__init__.py", known) for m, p in paths.items()}


def part(module: str, package: str = PACKAGE) -> str:
    """The room (or top-level module) a module of the package belongs to."""
    rest = module[len(package) + 1:] if module != package else ""
    return rest.split(".")[0]


def violations(graph: dict[str, set[str]], package: str = PACKAGE) -> list[str]:
    found = []
    for module, targets in sorted(graph.items()):
        mine = part(module, package)
        for target in sorted(targets):
            theirs = part(target, package)
            if target == package:
                continue  # the package's __init__: only the start-up trick, imported first anyway
            if theirs not in ALLOWED.get(mine, set()):
                found.append(f"{module} imports {target}: {mine or 'grading'} may not import "
                             f"{theirs}")
    return found


def circles(graph: dict[str, set[str]]) -> list[list[str]]:
    """Every strongly connected group of more than one module (Tarjan's algorithm)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on: set[str] = set()
    found: list[list[str]] = []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        on.add(v)
        for w in graph.get(v, ()):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            group = []
            while True:
                w = stack.pop()
                on.discard(w)
                group.append(w)
                if w == v:
                    break
            if len(group) > 1:
                found.append(sorted(group))

    for v in sorted(graph):
        if v not in index:
            visit(v)
    return found


def oversized(top: Path, package: str) -> list[str]:
    """Functions longer than MAX_LINES or with more than MAX_PARAMETERS parameters (``self``,
    ``cls`` and a ``config: GradeConfig`` not counted)."""
    found = []
    for path in sorted(top.rglob("*.py")):
        module = module_name(path, top, package)
        for node in ast.walk(ast.parse(path.read_text())):
            if not isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                continue
            a = node.args
            params = [*a.posonlyargs, *a.args, *a.kwonlyargs, *filter(None, (a.vararg, a.kwarg))]
            counted = [p for p in params if p.arg not in ("self", "cls", "config")]
            lines = node.end_lineno - node.lineno + 1
            where = f"{module}.{node.name} (line {node.lineno})"
            if lines > MAX_LINES:
                found.append(f"{where} is {lines} lines long (at most {MAX_LINES})")
            if len(counted) > MAX_PARAMETERS and f"{module}.{node.name}" not in THIN_WRAPPERS:
                found.append(f"{where} takes {len(counted)} parameters (at most {MAX_PARAMETERS} "
                             "besides a GradeConfig)")
    return found


# --------------------------------------------------------------------------- the rules


GRAPH = import_graph(GRADING, PACKAGE)


def test_the_rooms_exist_and_say_what_they_own():
    for room in ROOMS:
        init = GRADING / room / "__init__.py"
        assert init.is_file(), f"grading/{room}/ is not a package"
        doc = ast.get_docstring(ast.parse(init.read_text())) or ""
        assert "Owns" in doc and "May import" in doc and "Never" in doc, (
            f"grading/{room}/__init__.py must say what it owns and what it may import")
    for name in ("run.sandbox", "judge.questions", "record.gradebook", "handback.export",
                 "config", "pipeline"):
        assert f"{PACKAGE}.{name}" in GRAPH, f"{name} is missing"


def test_rooms_import_only_what_they_may():
    assert violations(GRAPH) == []


def test_no_circle_between_modules():
    assert circles(GRAPH) == []


def test_functions_fit_on_a_screen():
    assert oversized(GRADING, PACKAGE) == []


# --------------------------------------------------------------------------- the rules can fail


@pytest.fixture
def house(tmp_path):
    """A small package with a forbidden door, a circle and an oversized function."""
    top = tmp_path / "grading"
    for room in ("run", "judge", "record"):
        (top / room).mkdir(parents=True)
        (top / room / "__init__.py").write_text("")
    (top / "__init__.py").write_text("")
    (top / "pipeline.py").write_text("from .run.sandbox import launch\n")
    (top / "run" / "sandbox.py").write_text("def launch():\n    pass\n")
    (top / "judge" / "questions.py").write_text(
        "def f():\n    from ..run import sandbox\n    from . import evaluate\n")
    (top / "judge" / "evaluate.py").write_text("from .questions import f\n")
    (top / "record" / "gradebook.py").write_text(
        "from ..pipeline import x\n\n\ndef g(a, b, c, d, e, f, g, h, i, config):\n"
        + "    pass\n" * 85)
    return top


def test_the_rules_find_a_forbidden_door_a_circle_and_a_long_function(house):
    graph = import_graph(house, "pkg.grading")
    assert graph["pkg.grading.judge.questions"] == {"pkg.grading.run.sandbox",
                                                    "pkg.grading.judge.evaluate"}
    found = violations(graph, "pkg.grading")
    assert found == [
        "pkg.grading.judge.questions imports pkg.grading.run.sandbox: judge may not import run",
        "pkg.grading.record.gradebook imports pkg.grading.pipeline: record may not import "
        "pipeline",
    ]
    assert circles(graph) == [["pkg.grading.judge.evaluate", "pkg.grading.judge.questions"]]
    long = oversized(house, "pkg.grading")
    assert len(long) == 2 and "86 lines" in long[0] and "9 parameters" in long[1]
