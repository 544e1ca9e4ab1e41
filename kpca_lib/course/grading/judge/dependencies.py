"""Which names a notebook cell binds and reads, found by parsing it (never by running it).

The grader uses this on the trusted side to decide which demo cells (figures, widgets) a
submission needs: a demo cell runs when a later cell reads a name it binds. ``None`` means
"cannot tell" (a syntax error, ``exec``, ``globals()``...): the caller then keeps every demo.
IPython syntax (``%magic``, ``!shell``) is translated to Python first, as the kernel does.
"""

from __future__ import annotations

import ast
from functools import lru_cache

__all__ = ["binds", "reads", "references"]

#: Calls that read or write names the parser cannot see.
_OPAQUE = frozenset({"exec", "eval", "globals", "locals", "vars", "get_ipython", "__import__",
                     "run_line_magic", "run_cell", "run_cell_magic"})
#: ``get_ipython().<method>`` as IPython writes ``%magic`` and ``!shell`` lines.
_SHELL_METHODS = frozenset({"run_line_magic", "run_cell_magic", "system", "getoutput"})
#: Magics that run code the parser cannot see (another file, the history, a macro).
_OPAQUE_MAGICS = frozenset({"run", "load", "recall", "rerun", "macro", "store", "edit", "paste", "cpaste"})


def _magic_names(call: ast.Call) -> set[str] | None:
    """The names a ``get_ipython().run_line_magic(...)``-style call reads (``%timeit f(x)`` reads
    ``f`` and ``x``), or ``None`` when it may run code the parser cannot see."""
    args = [a.value if isinstance(a, ast.Constant) and isinstance(a.value, str) else None for a in call.args]
    if not args or args[0] is None:
        return None
    if isinstance(call.func, ast.Attribute) and call.func.attr in ("system", "getoutput"):
        return set()
    if args[0] in _OPAQUE_MAGICS:
        return None
    names: set[str] = set()
    for text in args[1:]:
        if text is None:
            return None
        try:
            names |= {n.id for n in ast.walk(ast.parse(text.strip() or "pass")) if isinstance(n, ast.Name)}
        except SyntaxError:
            continue  # options such as `inline`: no code
    return names


@lru_cache(maxsize=4096)
def _tree(src: str) -> ast.Module | None:
    try:
        from IPython.core.inputtransformer2 import TransformerManager

        code = TransformerManager().transform_cell(src)
    except Exception:
        code = src
    try:
        return ast.parse(code)
    except (SyntaxError, ValueError, RecursionError, MemoryError):
        return None


@lru_cache(maxsize=4096)
def binds(src: str) -> frozenset[str] | None:
    """Top-level names the cell binds (assignments, ``def``, ``class``, imports, ``for``/``with``
    targets), or ``None`` when it cannot be parsed."""
    tree = _tree(src)
    if tree is None:
        return None
    out: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            out.add(node.name)
        elif isinstance(node, ast.Name) and isinstance(node.ctx, (ast.Store, ast.Del)):
            out.add(node.id)
        elif isinstance(node, ast.alias):
            out.add((node.asname or node.name).split(".")[0])
    return frozenset(out)


@lru_cache(maxsize=4096)
def reads(src: str) -> frozenset[str] | None:
    """Every name the cell mentions (read, or attribute base), or ``None`` when it cannot be
    parsed or uses something that reaches names indirectly (``exec``, ``globals()``...)."""
    tree = _tree(src)
    if tree is None:
        return None
    shell_calls = [n for n in ast.walk(tree) if isinstance(n, ast.Call) and isinstance(n.func, ast.Attribute)
                   and n.func.attr in _SHELL_METHODS and isinstance(n.func.value, ast.Call)
                   and isinstance(n.func.value.func, ast.Name) and n.func.value.func.id == "get_ipython"]
    out = {node.id for node in ast.walk(tree) if isinstance(node, ast.Name)}
    for call in shell_calls:
        names = _magic_names(call)
        if names is None:
            return None
        out |= names
    shells = {id(c.func) for c in shell_calls}
    uses = sum(1 for n in ast.walk(tree) if isinstance(n, ast.Name) and n.id == "get_ipython")
    if uses > len(shell_calls) or (out - {"get_ipython"}) & _OPAQUE or any(
            isinstance(n, ast.Attribute) and n.attr in _OPAQUE and id(n) not in shells for n in ast.walk(tree)):
        return None
    return frozenset(out - {"get_ipython"})


def references(src: str, names: frozenset[str]) -> set[str]:
    """Which of ``names`` (plain or the last part of a dotted name) the cell mentions: as a
    name, an attribute, an imported name, or a string constant (``getattr(m, "name")``)."""
    tree = _tree(src)
    if tree is None:
        return {n for n in names if n.rsplit(".", 1)[-1] in src}
    short = {n.rsplit(".", 1)[-1]: n for n in names}
    found: set[str] = set()
    for node in ast.walk(tree):
        word = None
        if isinstance(node, ast.Name):
            word = node.id
        elif isinstance(node, ast.Attribute):
            word = node.attr
        elif isinstance(node, ast.alias):
            word = node.name.rsplit(".", 1)[-1]
        elif isinstance(node, ast.Constant) and isinstance(node.value, str):
            word = node.value.strip().rsplit(".", 1)[-1]
        if word in short:
            found.add(short[word])
    return found
