"""Which names a notebook cell binds and reads, found by parsing it (never by running it).

The grader uses this on the trusted side to decide which demo cells (figures, widgets) a
submission needs: a demo cell runs when a later cell reads a name it binds. ``None`` means
"cannot tell" (a syntax error, ``exec``, ``globals()``...): the caller then keeps every demo.
IPython syntax (``%magic``, ``!shell``) is translated to Python first, as the kernel does.
"""

from __future__ import annotations

import ast
import symtable
from functools import lru_cache

__all__ = ["binds", "reads", "free_reads", "top_binds", "references"]

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


_SCOPES = (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef, ast.Lambda, ast.ListComp, ast.SetComp,
           ast.DictComp, ast.GeneratorExp)


class _Order(ast.NodeVisitor):
    """Module-level names in the order the cell runs them: a name is *free* when it is read before
    the cell binds it (an assignment's value runs before its targets; the body of a function,
    a lambda or a comprehension is a scope of its own, read later or apart)."""

    def __init__(self) -> None:
        self.bound: set[str] = set()
        self.free: set[str] = set()

    def visit_Name(self, node: ast.Name) -> None:
        if isinstance(node.ctx, ast.Load):
            if node.id not in self.bound:
                self.free.add(node.id)
        else:
            self.bound.add(node.id)

    def _assign(self, value: ast.AST | None, targets: list[ast.expr]) -> None:
        if value is not None:
            self.visit(value)
        for target in targets:
            self.visit(target)

    def visit_Assign(self, node: ast.Assign) -> None:
        self._assign(node.value, node.targets)

    def visit_AnnAssign(self, node: ast.AnnAssign) -> None:
        self._assign(node.value, [node.target])

    def visit_AugAssign(self, node: ast.AugAssign) -> None:
        if isinstance(node.target, ast.Name) and node.target.id not in self.bound:
            self.free.add(node.target.id)  # x += 1 reads x first
        self._assign(node.value, [node.target])

    def visit_NamedExpr(self, node: ast.NamedExpr) -> None:
        self._assign(node.value, [node.target])

    def visit_For(self, node: ast.For | ast.AsyncFor) -> None:
        self.visit(node.iter)
        self.visit(node.target)
        for child in [*node.body, *node.orelse]:
            self.visit(child)

    visit_AsyncFor = visit_For

    def visit_alias(self, node: ast.alias) -> None:
        self.bound.add((node.asname or node.name).split(".")[0])

    def _scope(self, node: ast.AST) -> None:
        """Only what runs now: decorators, defaults, bases, and a comprehension's first iterable;
        the def or class name is bound after them. The scope's own body is read by symtable."""
        for part in ("decorator_list", "bases", "keywords"):
            for child in getattr(node, part, []):
                self.visit(child)
        args = getattr(node, "args", None)
        if isinstance(args, ast.arguments):
            for default in [*args.defaults, *[d for d in args.kw_defaults if d is not None]]:
                self.visit(default)
        generators = getattr(node, "generators", None)
        if generators:
            self.visit(generators[0].iter)
        name = getattr(node, "name", None)
        if name:
            self.bound.add(name)

    visit_FunctionDef = visit_AsyncFunctionDef = visit_ClassDef = _scope
    visit_Lambda = visit_ListComp = visit_SetComp = visit_DictComp = visit_GeneratorExp = _scope


def _global_reads(table: symtable.SymbolTable) -> set[str]:
    """Names that the nested scopes of ``table`` read from the module (globals they do not bind)."""
    out: set[str] = set()
    for child in table.get_children():
        for sym in child.get_symbols():
            if sym.is_referenced() and (sym.is_global() or sym.is_declared_global()) and not sym.is_assigned():
                out.add(sym.get_name())
        out |= _global_reads(child)
    return out


@lru_cache(maxsize=4096)
def free_reads(src: str) -> frozenset[str] | None:
    """The names the cell reads that it has not bound itself before (so that come from an earlier
    cell): not a comprehension's own loop variable, a function's parameter or local, a name the
    cell imports or assigns before reading it, nor one a function reads that the cell binds
    (it runs after). ``None`` when the cell cannot be parsed or reaches names indirectly (as
    :func:`reads`)."""
    tree, everything = _tree(src), reads(src)
    if tree is None or everything is None:
        return None
    order = _Order()
    for statement in tree.body:
        order.visit(statement)
    try:
        table = symtable.symtable(ast.unparse(tree), "<cell>", "exec")
    except (SyntaxError, ValueError, RecursionError):
        return None
    late = _global_reads(table) - order.bound
    magics = everything - {n.id for n in ast.walk(tree) if isinstance(n, ast.Name)}  # %timeit f(x)
    return frozenset((order.free | late | magics) & everything)


@lru_cache(maxsize=4096)
def top_binds(src: str) -> frozenset[str] | None:
    """The names the cell binds at module level (what later cells see), or ``None`` when it cannot
    be parsed. Unlike :func:`binds`, a function's locals and a comprehension's variables are not
    among them; names a function declares ``global`` are."""
    tree = _tree(src)
    if tree is None:
        return None
    order = _Order()
    for statement in tree.body:
        order.visit(statement)
    declared = {name for node in ast.walk(tree) if isinstance(node, ast.Global) for name in node.names}
    return frozenset(order.bound | declared)
