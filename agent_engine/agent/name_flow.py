"""Which names a piece of Python reads and binds, in the order it runs them: the data flow the repairs of
lost and shuffled lines read.

``name_flow(nodes)`` walks statements (or any node) in evaluation order: a value before its targets,
an augmented target read before its value, a loop's iterable before its target, a comprehension's
first iterable in the enclosing scope and its loop variables its own. Nested functions, lambdas and
classes are scopes of their own: what they evaluate where they stand (decorators, defaults, bases) and
their names count here; what their bodies read and bind is kept apart (``nested_loads``,
``nested_stores``). ``statement_order`` orders a block by it; ``code_notes`` finds lost lines' marks
with it.

Part of the tool program (``agent_engine.agent.aci.tool_program`` runs this source before
``code_notes``'s, in one namespace); plain classes (that namespace is no module), standard library
only; importing it runs nothing.

Invariants: pure (reads only the nodes given); every ``NameUse`` of one walk has its own ``tick``,
increasing in evaluation order; a ``del`` counts as a read.
"""

from __future__ import annotations

import ast
from collections.abc import Iterable

NESTED_SCOPES = (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef, ast.Lambda)
COMPREHENSION_NODES = (ast.ListComp, ast.SetComp, ast.DictComp, ast.GeneratorExp)


class NameUse:
    """One occurrence of a name: its place in the order of evaluation, its line, and its node."""

    __slots__ = ("tick", "line", "node")

    def __init__(self, tick: int, line: int, node: ast.AST) -> None:
        self.tick, self.line, self.node = tick, line, node


class NameFlow:
    """The names of one walk: each one's binds (``stores``) and reads (``loads``), in evaluation order."""

    def __init__(self) -> None:
        self.stores: dict[str, list[NameUse]] = {}
        self.loads: dict[str, list[NameUse]] = {}
        self.nested_loads: set[str] = set()  # read inside nested functions, lambdas, classes
        self.nested_stores: set[str] = set()
        self.declared: set[str] = set()  # ``global`` / ``nonlocal``
        self.tick = 0

    def use(self, table: dict[str, list[NameUse]], name: str, node: ast.AST) -> None:
        self.tick += 1
        table.setdefault(name, []).append(NameUse(self.tick, getattr(node, "lineno", 0), node))

    @property
    def written(self) -> set[str]:
        """The names the walk binds."""
        return set(self.stores)

    @property
    def read(self) -> set[str]:
        """The names the walk reads, in its own scope or a nested one."""
        return set(self.loads) | self.nested_loads

    @property
    def first_reads(self) -> list[str]:
        """The names the walk reads before binding them (or never binds), in the order of their first read."""
        exposed = [(uses[0].tick, name) for name, uses in self.loads.items()
                   if name not in self.stores or uses[0].tick < self.stores[name][0].tick]
        return [name for _, name in sorted(exposed)]


def name_flow(nodes: Iterable[ast.AST]) -> NameFlow:
    """The names ``nodes`` (run one after another) read and bind; see the module docstring."""
    flow = NameFlow()
    walker = _Walker(flow)
    for node in nodes:
        walker.visit(node, frozenset())
    return flow


def parameters(function: ast.AST) -> set[str]:
    """The names of a function's (or lambda's) parameters, ``*args`` and ``**kwargs`` included."""
    args = getattr(function, "args", None)
    if not isinstance(args, ast.arguments):
        return set()
    extra = [a for a in (args.vararg, args.kwarg) if a is not None]
    return {a.arg for a in [*args.posonlyargs, *args.args, *args.kwonlyargs, *extra]}


def unbound_reads(function: ast.FunctionDef | ast.AsyncFunctionDef, flow: NameFlow | None = None) -> list[str]:
    """Locals the function reads before any statement of its body binds them (an ``UnboundLocalError`` on
    that path): names it binds somewhere and reads first, no parameter and not declared ``global`` or
    ``nonlocal``; in the order of their first read. ``flow``: the body's walk, when the caller has it."""
    flow = name_flow(function.body) if flow is None else flow
    skip = parameters(function) | flow.declared
    return [name for name in flow.first_reads if name in flow.stores and name not in skip]


class _Walker:
    """The walk itself: one ``visit`` per node, ``hidden`` the loop variables of the comprehensions the
    node sits in (their own names, not the walk's)."""

    def __init__(self, flow: NameFlow) -> None:
        self.flow = flow

    def visit(self, node: ast.AST, hidden: frozenset[str]) -> None:
        flow = self.flow
        if isinstance(node, NESTED_SCOPES):
            self._scope(node, hidden)
        elif isinstance(node, COMPREHENSION_NODES):
            self._comprehension(node, hidden)
        elif isinstance(node, ast.Name):
            if node.id not in hidden:
                flow.use(flow.loads if isinstance(node.ctx, ast.Load | ast.Del) else flow.stores, node.id, node)
        elif isinstance(node, ast.Assign | ast.AnnAssign | ast.NamedExpr):
            if node.value is not None:
                self.visit(node.value, hidden)
            for target in node.targets if isinstance(node, ast.Assign) else [node.target]:
                self.visit(target, hidden)
        elif isinstance(node, ast.AugAssign):
            if isinstance(node.target, ast.Name) and node.target.id not in hidden:
                flow.use(flow.loads, node.target.id, node.target)
            self.visit(node.value, hidden)
            self.visit(node.target, hidden)
        elif isinstance(node, ast.For | ast.AsyncFor):
            for part in [node.iter, node.target, *node.body, *node.orelse]:
                self.visit(part, hidden)
        elif isinstance(node, ast.Global | ast.Nonlocal):
            flow.declared.update(node.names)
        elif isinstance(node, ast.Import | ast.ImportFrom):
            for alias in node.names:
                flow.use(flow.stores, (alias.asname or alias.name).split(".")[0], node)
        elif isinstance(node, ast.ExceptHandler):
            if node.type is not None:
                self.visit(node.type, hidden)
            if node.name:
                flow.use(flow.stores, node.name, node)
            for stmt in node.body:
                self.visit(stmt, hidden)
        else:
            for name in pattern_names(node):
                flow.use(flow.stores, name, node)
            for child in ast.iter_child_nodes(node):
                self.visit(child, hidden)

    def _scope(self, node: ast.AST, hidden: frozenset[str]) -> None:
        """A def, class or lambda: what it evaluates where it stands, its name; its body apart."""
        if isinstance(node, ast.ClassDef):
            here = [*node.decorator_list, *node.bases, *(k.value for k in node.keywords)]
        else:
            args: ast.arguments = node.args  # type: ignore[attr-defined]
            here = [*getattr(node, "decorator_list", []), *args.defaults, *(d for d in args.kw_defaults if d is not None)]
        for part in here:
            self.visit(part, hidden)
        body = node.body if isinstance(node.body, list) else [node.body]  # type: ignore[attr-defined]
        for part in body:
            for sub in ast.walk(part):
                if isinstance(sub, ast.Name):
                    (self.flow.nested_loads if isinstance(sub.ctx, ast.Load | ast.Del) else
                     self.flow.nested_stores).add(sub.id)
                elif isinstance(sub, ast.Nonlocal | ast.Global):
                    self.flow.nested_stores.update(sub.names)
        if not isinstance(node, ast.Lambda):
            self.flow.use(self.flow.stores, node.name, node)  # type: ignore[attr-defined]

    def _comprehension(self, node: ast.AST, hidden: frozenset[str]) -> None:
        generators: list[ast.comprehension] = node.generators  # type: ignore[attr-defined]
        bound = set(hidden)
        for k, gen in enumerate(generators):
            self.visit(gen.iter, hidden if k == 0 else frozenset(bound))  # the first iterable: the enclosing scope
            bound |= {n.id for n in ast.walk(gen.target) if isinstance(n, ast.Name)}
            for cond in gen.ifs:
                self.visit(cond, frozenset(bound))
        parts = [node.key, node.value] if isinstance(node, ast.DictComp) else [node.elt]  # type: ignore[attr-defined]
        for part in parts:
            self.visit(part, frozenset(bound))


def pattern_names(node: ast.AST) -> list[str]:
    """Names a ``match`` pattern node binds (``case [x, *rest]``, ``case {"k": v, **more}``)."""
    if isinstance(node, ast.MatchAs | ast.MatchStar) and node.name:
        return [node.name]
    if isinstance(node, ast.MatchMapping) and node.rest:
        return [node.rest]
    return []
