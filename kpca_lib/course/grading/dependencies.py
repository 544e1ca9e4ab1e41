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


def binds(src: str) -> set[str] | None:
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
    return out


def reads(src: str) -> set[str] | None:
    """Every name the cell mentions (read, or attribute base), or ``None`` when it cannot be
    parsed or uses something that reaches names indirectly (``exec``, ``globals()``...)."""
    tree = _tree(src)
    if tree is None:
        return None
    out = {node.id for node in ast.walk(tree) if isinstance(node, ast.Name)}
    if out & _OPAQUE or any(isinstance(n, ast.Attribute) and n.attr in _OPAQUE for n in ast.walk(tree)):
        return None
    return out


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
