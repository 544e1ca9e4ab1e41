"""The method rule a question declares with ``forbid``, enforced from the grader's side.

A question may forbid calls (``define_question(..., forbid=("kpca_lib.centering.center_kernel",
...))``). Inside the kernel a profiler watches the probe's calls (``questions.forbidden_calls``),
which names the slip to an honest student but is no boundary: the student's own process can
switch a profiler off, call from a thread it started earlier, or build the function under
another name. So the rule is held here, on the submitted source, for every cell the student
wrote *before the question's check cell* (whatever question it belongs to: a later cell cannot
change what was exported): none of them may

* name a forbidden function or class (as a name, an attribute, an import, or a string),
* or use a construct that hides which function is called, runs code the grader cannot read,
  or steps around the in-kernel observer: dynamic code (``exec``, ``eval``, ``compile``,
  ``__import__``, ``getattr`` with a computed name, ``globals()``...), introspection
  (``__dict__``, ``__code__``, frames, ``gc``, ``inspect``), profilers and tracers, threads and
  other processes, serialised code (``pickle``, ``marshal``), star imports, and modules that
  are not installed (written by the notebook itself).

:func:`unverifiable` says why, in the student's words; the question's checks then do not count.
A literal copy of a library function, written out as the student's own code, is not detected:
the rule forbids *calling* the library, and a pasted copy is a matter for the instructor.
"""

from __future__ import annotations

import ast
import importlib.util
from functools import lru_cache

from .dependencies import _tree, references

__all__ = ["unverifiable", "hidden_calls", "grader_names", "strings_naming"]

#: Names whose use hides what is called or runs unread code (builtins), or reaches the
#: grader's own code in the kernel (the export it calls in each check cell).
_NAMES = frozenset(
    {
        "exec",
        "eval",
        "compile",
        "__import__",
        "globals",
        "locals",
        "vars",
        "breakpoint",
        "__builtins__",
        "get_ipython",
        "_kpca_export",
        "_kpca_install",
    }
)
#: Text inside a string that names the grader's machinery in the kernel (its configuration,
#: with the key that signs the exports, and its export).
_GRADER_TEXT = ("_kpca", "KPCA_", "/run/kpca")
#: Attributes that reach objects by computed names, read code or frames, or start code
#: elsewhere (another thread or process, a shell).
_ATTRS = frozenset(
    {
        "__dict__",
        "__globals__",
        "__builtins__",
        "__code__",
        "__closure__",
        "__defaults__",
        "__kwdefaults__",
        "__getattribute__",
        "__getattr__",
        "__subclasses__",
        "__mro__",
        "__bases__",
        "__base__",
        "__self__",
        "__func__",
        "__wrapped__",
        "__reduce__",
        "__reduce_ex__",
        "__loader__",
        "__spec__",
        "__file__",
        "__import__",
        "co_consts",
        "f_globals",
        "f_locals",
        "f_back",
        "f_builtins",
        "tb_frame",
        "gi_frame",
        "cr_frame",
        "ag_frame",
        "_getframe",
        "settrace",
        "setprofile",
        "monitoring",
        "addaudithook",
        "modules",
        "meta_path",
        "path_hooks",
        "attrgetter",
        "methodcaller",
        "eval",
        "exec",
        "Thread",
        "Timer",
        "start_new_thread",
        "ThreadPoolExecutor",
        "ProcessPoolExecutor",
        "run_in_executor",
        "Process",
        "Pool",
        "fork",
        "forkpty",
        "system",
        "popen",
        "Popen",
        "spawnv",
        "spawnl",
        "spawnve",
        "spawnlp",
        "posix_spawn",
        "posix_spawnp",
        "execv",
        "execve",
        "execl",
        "execle",
        "execlp",
        "execvp",
        "execvpe",
        "run_cell",
        "run_line_magic",
        "run_cell_magic",
        "getoutput",
    }
)
#: Modules whose import hides calls, runs code elsewhere, or rebuilds code from data.
_MODULES = frozenset(
    {
        "importlib",
        "imp",
        "runpy",
        "pkgutil",
        "zipimport",
        "code",
        "codeop",
        "pickle",
        "cPickle",
        "_pickle",
        "dill",
        "cloudpickle",
        "marshal",
        "shelve",
        "copyreg",
        "ctypes",
        "cffi",
        "gc",
        "inspect",
        "dis",
        "builtins",
        "_thread",
        "threading",
        "concurrent",
        "multiprocessing",
        "subprocess",
        "pty",
        "posix",
        "asyncio",
        "joblib",
        "dask",
        "ray",
        "atexit",
        "trace",
        "pdb",
        "bdb",
        "profile",
        "cProfile",
        "__main__",
    }
)
_GRADER_PACKAGE = "kpca_lib.course.grading"
#: Names imported from an allowed module that do the same (``from os import system``).
_IMPORTED = _ATTRS | _NAMES


@lru_cache(maxsize=256)
def _installed(top: str) -> bool:
    """Whether ``top`` is a module of the installation (not one the notebook wrote itself)."""
    try:
        return importlib.util.find_spec(top) is not None
    except (ImportError, ValueError):
        return False


def _constant_getattr(node: ast.Call) -> bool:
    """``getattr(obj, "name")`` or ``getattr(obj, "name", default)``: a name the scan reads."""
    return (
        len(node.args) in (2, 3)
        and isinstance(node.args[1], ast.Constant)
        and isinstance(node.args[1].value, str)
    )


def hidden_calls(src: str, grader: frozenset[str] = frozenset()) -> list[str]:
    """What in the cell ``src`` hides which function is called (sorted, as the student wrote
    it), ``[]`` when the cell cannot be parsed (it then raises ``SyntaxError`` and runs
    nothing). ``grader``: names the assignment's own cells imported from the grader's package
    (its reference helpers), which a student's cell may not use either."""
    tree = _tree(src)
    if tree is None:
        return []
    found: set[str] = set()
    direct = {
        id(n.func)
        for n in ast.walk(tree)
        if isinstance(n, ast.Call)
        and isinstance(n.func, ast.Name)
        and n.func.id in ("getattr", "setattr", "delattr", "hasattr")
        and _constant_getattr(n)
    }
    direct |= _constant_lookups(tree, grader)
    for node in ast.walk(tree):
        if isinstance(node, ast.Name):
            if node.id in _NAMES and id(node) not in direct:
                found.add(f"{node.id}")
            elif node.id in grader:
                found.add(f"{node.id} (a helper of the grader)")
            elif node.id in ("getattr", "setattr", "delattr", "hasattr") and id(node) not in direct:
                found.add(f"{node.id} with a computed name")
        elif isinstance(node, ast.Attribute) and node.attr in _ATTRS:
            found.add(f".{node.attr}")
        elif isinstance(node, (ast.Import, ast.ImportFrom)):
            found |= _import_problems(node)
        elif isinstance(node, ast.Constant) and isinstance(node.value, (str, bytes)):
            text = node.value if isinstance(node.value, str) else node.value.decode("latin-1")
            if any(t in text for t in _GRADER_TEXT):
                found.add("a string naming the grader's files")
    return sorted(found)


def _constant_lookups(tree: ast.AST, grader: frozenset[str]) -> set[int]:
    """The ``globals``/``locals``/``vars`` names of ``"name" in globals()``, ``globals()["name"]``
    and ``globals().get("name")`` with a constant, plain name (a cache's test, not a hidden call):
    ids of their ``ast.Name`` nodes."""

    def plain(node: ast.AST) -> bool:
        return (
            isinstance(node, ast.Constant)
            and isinstance(node.value, str)
            and node.value.isidentifier()
            and node.value not in _NAMES
            and node.value not in grader
            and not node.value.startswith("_kpca")
        )

    def lookup(call: ast.AST) -> int | None:
        if (
            isinstance(call, ast.Call)
            and not call.args
            and not call.keywords
            and isinstance(call.func, ast.Name)
            and call.func.id in ("globals", "locals", "vars")
        ):
            return id(call.func)
        return None

    ok: set[int] = set()
    for node in ast.walk(tree):
        if (
            isinstance(node, ast.Compare)
            and plain(node.left)
            and all(isinstance(op, (ast.In, ast.NotIn)) for op in node.ops)
        ):
            ok |= {i for c in node.comparators if (i := lookup(c)) is not None}
        elif (
            isinstance(node, ast.Subscript) and plain(node.slice) and isinstance(node.ctx, ast.Load)
        ):
            ok |= {i for i in [lookup(node.value)] if i is not None}
        elif (
            isinstance(node, ast.Call)
            and isinstance(node.func, ast.Attribute)
            and node.func.attr == "get"
            and node.args
            and plain(node.args[0])
        ):
            ok |= {i for i in [lookup(node.func.value)] if i is not None}
    return ok


def grader_names(sources: list[str]) -> frozenset[str]:
    """Names the assignment's own cells (``sources``) import from the grader's package
    (``kpca_lib.course.grading``): reference helpers a student's cell may not call."""
    names: set[str] = set()
    for src in sources:
        tree = _tree(src)
        for node in ast.walk(tree) if tree is not None else ():
            if isinstance(node, ast.ImportFrom) and (node.module or "").startswith(_GRADER_PACKAGE):
                names |= {a.asname or a.name for a in node.names if a.name != "*"}
    return frozenset(names)


def _import_problems(node: ast.Import | ast.ImportFrom) -> set[str]:
    out: set[str] = set()
    if isinstance(node, ast.ImportFrom):
        if node.level:
            return {"a relative import"}
        modules = [node.module or ""]
        for alias in node.names:
            if alias.name == "*":
                out.add(f"from {node.module} import *")
            elif alias.name in _IMPORTED:
                out.add(f"from {node.module} import {alias.name}")
    else:
        modules = [alias.name for alias in node.names]
    for module in modules:
        top = module.split(".")[0]
        if module.startswith(_GRADER_PACKAGE):
            out.add(f"import {module} (the grader's own code)")
        elif top in _MODULES:
            out.add(f"import {module}")
        elif top and not _installed(top):
            out.add(f"import {module} (not an installed module)")
    return out


def strings_naming(src: str, names: frozenset[str]) -> set[str]:
    """Which of ``names`` (dotted) appear, qualified by their module's last part
    (``"centering.center_kernel"``, ``"decomposition.PCA"``), inside a string or bytes constant
    of the cell: a name to import or look up by text. (A string that is exactly the short name,
    ``getattr(m, "center_kernel")``, is found by ``dependencies.references``; a word in a
    docstring, "PCA of X", is no call.)"""
    tree = _tree(src)
    qualified = {".".join(n.split(".")[-2:]): n for n in names if n.count(".") >= 1}
    if tree is None:
        return {n for q, n in qualified.items() if q in src}
    found: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Constant) and isinstance(node.value, (str, bytes)):
            text = node.value if isinstance(node.value, str) else node.value.decode("latin-1")
            found |= {n for q, n in qualified.items() if q in text}
    return found


def unverifiable(
    forbid: tuple[str, ...],
    cells: list[tuple[str, str]],
    *,
    reported: bool = False,
    grader: frozenset[str] = frozenset(),
) -> str:
    """Why a question that forbids ``forbid`` does not count, read from ``cells`` (``(label,
    source)`` of every cell the student wrote before its check cell), or ``""``.

    * A cell hides what it calls (:func:`hidden_calls`, ``grader`` included): the method
      cannot be verified, whatever the kernel reported.
    * Otherwise a cell names a forbidden function (a name, an attribute, an import, inside a
      string): none of the checks count, unless the kernel's probe ``reported`` the call (its
      values are errors already, each check that reads one fails: the honest slip). Its report
      can only be forged by replacing the grader's export, which the first rule refuses.
    """
    if not forbid:
        return ""
    names = frozenset(forbid)
    named: set[str] = set()
    problems: list[str] = []
    for label, src in cells:
        named |= references(src, names) | strings_naming(src, names)
        hidden = hidden_calls(src, grader)
        if hidden:
            problems.append(f"{label} uses {', '.join(hidden[:4])}")
    if named and not problems:
        if reported:
            return ""
        return (
            f"your cells up to this question's check use {', '.join(sorted(named))}, which "
            "the question asks you not to call: the answer has to be your own code, so none "
            "of its checks count."
        )
    if not problems:
        return ""
    return (
        "this question asks you not to call "
        + ", ".join(f.rsplit(".", 1)[-1] for f in forbid)
        + "; the grader checks that from your code, and "
        + "; ".join(problems[:3])
        + ", which hides what is called (or runs code the grader cannot read), so the method "
        "cannot be verified and none of its checks count. Write these cells as plain Python "
        "calls (no exec/eval, threads, processes, introspection or star imports)."
    )
