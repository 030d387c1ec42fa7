"""Follow a value through the source, as a tool would: an AST walk from one function along the names
that carry it, through calls, attributes of ``self`` and return values, across modules.

``follow(roots, start, seeds)`` parses every module under ``roots`` and walks forward from function
``start`` (``(file, qualname)``) whose parameters ``seeds`` carry the value. Inside a function a name
carries it when it is assigned (or bound by ``for``, ``with``, a comprehension, a ``match`` pattern, a
nested ``def`` that reads one) from an expression that reads a carrying name. A call whose receiver or
arguments carry it hands it on to each function the call resolves to (by the rules below), to the
parameters those arguments bind; its result carries it too. A carrying value stored on ``self``
(assigned, or added to a container there) makes that attribute carry it in every method of the class
(so a queue drained by another method is followed); a function that returns a carrying value makes
its callers' call results carry it.

Calls resolve the way a reader would: ``self.m()`` to the class's (or its project bases') method;
``f()`` to the module's own or an imported function (a class: its construction is noted, its body
is not walked: carriers are plain values); ``x.m()`` to the method ``m`` of every project class named
in the module (defined or imported), a ``Protocol``'s method to the methods of the project classes
that implement the whole protocol; ``obj.DISPATCH(name, *args)`` (a call by a method's name, the job
table's ``_publish``) to the methods so named of the project classes that define them.

The result (``Flow``) has every function the value reached, the edges between them, the classes
built from it, and ``path(goal)``: the shortest chain of functions from ``start`` to ``goal``.
"""

from __future__ import annotations

import ast
from collections import deque
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from pathlib import Path

Fn = tuple[str, str]  # (file, qualified name: "func" or "Class.method")
FIELDS = frozenset({"hints", "job_id", "request_id", "request_ids"})  # where a carrier keeps the ids
DISPATCH = {"_publish": 0}  # method name -> the argument that names the method it calls
_ADDS = ("append", "appendleft", "extend", "add", "update", "put", "put_nowait")  # into a container


@dataclass
class _Func:
    key: Fn
    node: ast.FunctionDef | ast.AsyncFunctionDef
    cls: str | None
    params: list[str]


@dataclass
class _Module:
    path: str
    tree: ast.Module
    imported: set[str] = field(default_factory=set)


@dataclass
class Flow:
    walk: _Walk
    project: _Project
    reached: dict[Fn, set[str]]  # function -> its carrying parameters
    edges: dict[Fn, set[Fn]]  # hands the value on to (calls, shared attributes, return values)
    names: dict[Fn, set[str]]  # function -> its names that carry the value

    def path(self, goal: Fn, start: Fn) -> list[Fn]:
        """The shortest chain of functions from ``start`` to ``goal`` (empty if the value never gets there)."""
        parent: dict[Fn, Fn | None] = {start: None}
        todo = deque([start])
        while todo:
            fn = todo.popleft()
            if fn == goal:
                chain = [fn]
                while (prev := parent[chain[-1]]) is not None:
                    chain.append(prev)
                return chain[::-1]
            for nxt in sorted(self.edges.get(fn, ())):
                if nxt not in parent:
                    parent[nxt] = fn
                    todo.append(nxt)
        return []

    def crossed(self, chain: list[Fn]) -> dict[str, set[str]]:
        """The files the value crosses along ``chain``: each function's own, and those of what makes the
        values it hands to the next one (the functions whose results, and the classes whose instances,
        those values are made of from the value; in the first function, everything its carrying names
        were first bound to: where the value comes from), followed into what those functions return.
        Each file maps to the functions and classes of it that do so."""
        files: dict[str, set[str]] = {}
        seen: set[Fn] = set()
        todo: list[tuple[Fn, Fn | None, bool]] = [
            (fn, nxt, False) for fn, nxt in zip(chain, [*chain[1:], None], strict=True)]
        todo.append((chain[0], None, True))
        while todo:
            fn, nxt, makes = todo.pop()
            if (fn, nxt) in seen:
                continue
            seen.add((fn, nxt))
            files.setdefault(fn[0], set()).add(fn[1])
            func = self.project.funcs[fn]
            if makes and fn == chain[0]:  # where the carrying names come from
                handed, carrying = [ast.Name(id=n) for n in self.reached[fn]], None
            elif makes:  # a maker: what it returns is made for the value
                handed, carrying = _handed_on(self.project, func, None), self.names.get(fn) or None
            else:
                handed, carrying = _handed_on(self.project, func, nxt), self.names.get(fn, set())
            for call in _makers(self.walk, func, handed, carrying):
                callees, built = self.project.resolve(call, func)
                for rel in built:
                    files.setdefault(rel, set()).add(ast.unparse(call.func))
                todo += [(c, None, True) for c in callees]
        return files


class _Project:
    def __init__(self, root: Path, roots: Iterable[str]) -> None:
        self.modules: dict[str, _Module] = {}
        self.funcs: dict[Fn, _Func] = {}
        self.classes: dict[str, list[tuple[str, ast.ClassDef]]] = {}
        for r in roots:
            for path in sorted((root / r).rglob("*.py")):
                rel = path.relative_to(root).as_posix()
                self._index(rel, ast.parse(path.read_text(), filename=rel))

    def _index(self, rel: str, tree: ast.Module) -> None:
        mod = self.modules[rel] = _Module(rel, tree)
        for node in tree.body:
            if isinstance(node, ast.ImportFrom):
                mod.imported.update(a.asname or a.name for a in node.names)
            elif isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
                self._add(rel, node, None)
            elif isinstance(node, ast.ClassDef):
                self.classes.setdefault(node.name, []).append((rel, node))
                for item in node.body:
                    if isinstance(item, ast.FunctionDef | ast.AsyncFunctionDef):
                        self._add(rel, item, node.name)

    def _add(self, rel: str, node: ast.FunctionDef | ast.AsyncFunctionDef, cls: str | None) -> None:
        args = node.args
        params = [a.arg for a in [*args.posonlyargs, *args.args, *args.kwonlyargs]]
        key = (rel, node.name if cls is None else f"{cls}.{node.name}")
        self.funcs[key] = _Func(key, node, cls, params)

    # ---- resolution ------------------------------------------------------------------------------
    def methods(self, cls: str, name: str, seen: set[str] | None = None) -> list[Fn]:
        """``cls.name`` in the project class ``cls`` or its project bases."""
        seen = seen if seen is not None else set()
        found: list[Fn] = []
        for rel, node in self.classes.get(cls, []):
            if (rel, cls) in seen:
                continue
            seen.add((rel, cls))
            if (rel, f"{cls}.{name}") in self.funcs:
                found.append((rel, f"{cls}.{name}"))
            else:
                for base in node.bases:
                    if isinstance(base, ast.Name):
                        found += self.methods(base.id, name, seen)
        return found

    def attr_type(self, fn: _Func, attr: str) -> str | None:
        """The project class of ``self.<attr>`` in ``fn``'s class, as its annotations or constructions say."""
        if fn.cls is None:
            return None
        for rel, node in self.classes.get(fn.cls, []):
            if rel != fn.key[0]:
                continue
            for n in ast.walk(node):
                if isinstance(n, ast.AnnAssign) and (_self_attr(n.target) == attr or (
                        isinstance(n.target, ast.Name) and n.target.id == attr)):
                    return _type_name(n.annotation, self.classes)
                if isinstance(n, ast.Assign) and any(_self_attr(t) == attr for t in n.targets):
                    if isinstance(n.value, ast.Call) and isinstance(n.value.func, ast.Name) and n.value.func.id in self.classes:
                        return n.value.func.id
                    if isinstance(n.value, ast.Name):  # a parameter of the method that assigns it
                        for method in node.body:
                            if isinstance(method, ast.FunctionDef) and n in ast.walk(method):
                                for arg in method.args.args + method.args.kwonlyargs:
                                    if arg.arg == n.value.id and arg.annotation is not None:
                                        return _type_name(arg.annotation, self.classes)
        return None

    def implementers(self, protocol: ast.ClassDef) -> list[str]:
        wanted = {n.name for n in protocol.body if isinstance(n, ast.FunctionDef | ast.AsyncFunctionDef)}
        return [name for name, defs in self.classes.items() for _, node in defs
                if not _is_protocol(node) and wanted <= _method_names(node)]

    def resolve(self, call: ast.Call, fn: _Func) -> tuple[list[Fn], list[str]]:
        """The functions ``call`` in ``fn`` runs, and the files of the project classes it builds."""
        mod = self.modules[fn.key[0]]
        f = call.func
        if isinstance(f, ast.Name):
            if f.id in self.classes and (f.id in mod.imported or any(r == mod.path for r, _ in self.classes[f.id])):
                own = [r for r, _ in self.classes[f.id] if r == mod.path]
                return [], own or [r for r, _ in self.classes[f.id]]
            if (mod.path, f.id) in self.funcs:
                return [(mod.path, f.id)], []
            if f.id in mod.imported:
                return [k for k in self.funcs if k[1] == f.id], []
            return [], []
        if not isinstance(f, ast.Attribute):
            return [], []
        if f.attr in DISPATCH and call.args:
            named = call.args[DISPATCH[f.attr]]
            if isinstance(named, ast.Constant) and isinstance(named.value, str):
                return [k for k in self.funcs if k[1].endswith(f".{named.value}")], []
        if isinstance(f.value, ast.Name) and f.value.id == "self" and fn.cls is not None:
            return self.methods(fn.cls, f.attr), []
        found: list[Fn] = []
        known = mod.imported | {n.name for n in mod.tree.body if isinstance(n, ast.ClassDef)}
        attr = _self_attr(f.value) if isinstance(f.value, ast.Attribute) else None
        typed = self.attr_type(fn, attr) if attr is not None and isinstance(f.value.value, ast.Name) else None
        annotated = _param_annotation(fn, f.value.id) if isinstance(f.value, ast.Name) else None
        if annotated is not None:  # a parameter of a declared type: of the project's, or none of them
            typed = _type_name(_unaliased(annotated, mod), self.classes)
            if typed is None:
                return [], []
        known = {typed} if typed is not None else known - {fn.cls}  # a class calls itself through self
        for cls in sorted(known & set(self.classes)):
            for rel, node in self.classes[cls]:
                if (rel, f"{cls}.{f.attr}") not in self.funcs:
                    continue
                if _is_protocol(node):
                    found += [m for impl in self.implementers(node) for m in self.methods(impl, f.attr)]
                else:
                    found.append((rel, f"{cls}.{f.attr}"))
        return sorted(set(found)), []


def _type_name(annotation: ast.expr, classes: dict[str, list[tuple[str, ast.ClassDef]]]) -> str | None:
    """The project class an annotation names (``X``, ``X | None``, ``"X"``), if exactly one."""
    if isinstance(annotation, ast.Constant) and isinstance(annotation.value, str):
        annotation = ast.parse(annotation.value, mode="eval").body
    found = {n.id for n in ast.walk(annotation) if isinstance(n, ast.Name) and n.id in classes}
    return found.pop() if len(found) == 1 else None


def _unaliased(annotation: ast.expr, mod: _Module) -> ast.expr:
    """``annotation`` with the module's type aliases (``State = Annotated[ServerState, ...]``) spelt out."""
    aliases = {t.id: n.value for n in mod.tree.body if isinstance(n, ast.Assign)
               for t in n.targets if isinstance(t, ast.Name)}
    if isinstance(annotation, ast.Name) and annotation.id in aliases:
        return aliases[annotation.id]
    return annotation


def _param_annotation(fn: _Func, name: str) -> ast.expr | None:
    args = fn.node.args
    for arg in [*args.posonlyargs, *args.args, *args.kwonlyargs]:
        if arg.arg == name:
            return arg.annotation
    return None


def _is_protocol(node: ast.ClassDef) -> bool:
    return any(isinstance(b, ast.Name) and b.id == "Protocol" for b in node.bases)


def _method_names(node: ast.ClassDef) -> set[str]:
    return {n.name for n in node.body if isinstance(n, ast.FunctionDef | ast.AsyncFunctionDef)}


def _names(node: ast.AST | None) -> Iterator[str]:
    if node is not None:
        for n in ast.walk(node):
            if isinstance(n, ast.Name):
                yield n.id


def _targets(node: ast.AST) -> Iterator[str]:
    """The names an assignment target binds (``a``, ``a, *b``; not ``x.a`` nor ``x[a]``: those store)."""
    if isinstance(node, ast.Name):
        yield node.id
    elif isinstance(node, ast.Tuple | ast.List):
        for elt in node.elts:
            yield from _targets(elt)
    elif isinstance(node, ast.Starred):
        yield from _targets(node.value)


def _self_attr(node: ast.AST) -> str | None:
    """``X`` of ``self.X`` (or of ``self.X.<anything>``)."""
    while isinstance(node, ast.Attribute):
        if isinstance(node.value, ast.Name) and node.value.id == "self":
            return node.attr
        node = node.value
    return None


class _Walk:
    def __init__(self, project: _Project) -> None:
        self.p = project
        self.reached: dict[Fn, set[str]] = {}
        self.edges: dict[Fn, set[Fn]] = {}
        self.names: dict[Fn, set[str]] = {}
        self.attrs: set[tuple[str, str]] = set()  # (class, attribute) carrying the value
        self.returns: set[Fn] = set()
        self.todo: deque[Fn] = deque()

    def enter(self, fn: Fn, params: set[str], came_from: Fn | None, again: bool = False) -> None:
        """``fn`` gets the value in ``params`` (from ``came_from``); visited (again) when that is news,
        or ``again`` when what it reads changed (an attribute or a callee's result carries it now)."""
        if came_from is not None:
            self.edges.setdefault(came_from, set()).add(fn)
        have = self.reached.get(fn)
        if have is None:
            self.reached[fn] = set(params)
        elif params <= have and not again:
            return
        else:
            have |= params
        if fn not in self.todo:
            self.todo.append(fn)

    def run(self, start: Fn, seeds: set[str]) -> Flow:
        self.enter(start, seeds, None)
        while self.todo:
            self.visit(self.p.funcs[self.todo.popleft()])
        return Flow(self, self.p, self.reached, self.edges, self.names)

    def carries(self, node: ast.AST | None, names: set[str], fn: _Func) -> bool:
        """Whether ``node`` evaluates to something that carries the value: a carrying name, a field of
        the value's (``FIELDS``) on a carrier, a carrying attribute of ``self``, a call given the value
        or whose callee returns it, or a container or expression built of those."""
        if node is None or isinstance(node, ast.Lambda | ast.FunctionDef | ast.AsyncFunctionDef):
            return False
        if isinstance(node, ast.Name):
            return node.id in names
        if isinstance(node, ast.Attribute):
            if isinstance(node.value, ast.Name) and node.value.id == "self" and fn.cls is not None:
                return (fn.cls, node.attr) in self.attrs or ("self" in names and node.attr in FIELDS)
            return node.attr in FIELDS and self.carries(node.value, names, fn)
        if isinstance(node, ast.Call):
            receiver = node.func.value if isinstance(node.func, ast.Attribute) else None
            args = [*node.args, *(k.value for k in node.keywords)]
            callees = self.p.resolve(node, fn)[0]
            if not args and any(k in self.returns for k in callees):
                return True  # hands back what it holds (a queue drained, a value kept on self)
            if callees and self.carries(receiver, names, fn):
                return True  # a method of the carrier (``hints.scoped()``)
            return any(self.carries(a, names, fn) for a in args)
        if isinstance(node, ast.ListComp | ast.SetComp | ast.GeneratorExp):
            return self.carries(node.elt, names, fn)  # its targets carry when what they iterate does
        if isinstance(node, ast.DictComp):
            return self.carries(node.key, names, fn) or self.carries(node.value, names, fn)
        return any(self.carries(c, names, fn) for c in ast.iter_child_nodes(node))

    def visit(self, fn: _Func) -> None:
        names = set(self.reached[fn.key])
        nodes = list(ast.walk(fn.node))
        changed = True
        while changed:  # names bound from carrying values, to a fixed point
            before = len(names)
            for n in nodes:
                for target in _bound_from(n, names, fn, self):
                    names.update(_targets(target))
            changed = len(names) != before
        self.names[fn.key] = names
        for n in nodes:
            if isinstance(n, ast.Call):
                self.call(n, fn, names)
            elif isinstance(n, ast.Return) and self.carries(n.value, names, fn):
                self.returned(fn)
            elif isinstance(n, ast.Assign | ast.AugAssign | ast.AnnAssign) and self.carries(n.value, names, fn):
                targets = n.targets if isinstance(n, ast.Assign) else [n.target]
                for t in targets:
                    self.stored(fn, _self_attr(t))

    def call(self, call: ast.Call, fn: _Func, names: set[str]) -> None:
        receiver = call.func.value if isinstance(call.func, ast.Attribute) else None
        args = [*call.args, *(k.value for k in call.keywords)]
        if not (self.carries(receiver, names, fn) or any(self.carries(a, names, fn) for a in args)):
            return
        if receiver is not None and isinstance(call.func, ast.Attribute) and call.func.attr in _ADDS:
            self.stored(fn, _self_attr(receiver))
        callees, _ = self.p.resolve(call, fn)
        dispatched = isinstance(call.func, ast.Attribute) and call.func.attr in DISPATCH
        for callee in callees:
            target = self.p.funcs[callee]
            params = self.bind(call, target, names, fn, skip=1 if dispatched else 0)
            self.enter(callee, params, fn.key)

    def bind(self, call: ast.Call, target: _Func, names: set[str], fn: _Func, skip: int) -> set[str]:
        params = target.params[1:] if target.cls is not None else target.params
        bound = {"self"} if target.cls is not None and self.carries(getattr(call.func, "value", None), names, fn) else set()
        for i, arg in enumerate(call.args[skip:]):
            if isinstance(arg, ast.Starred) or i >= len(params):
                if self.carries(arg, names, fn):
                    bound.update(params)
                continue
            if self.carries(arg, names, fn):
                bound.add(params[i])
        for kw in call.keywords:
            if self.carries(kw.value, names, fn):
                bound.update([kw.arg] if kw.arg in params else params)
        return bound

    def stored(self, fn: _Func, attr: str | None) -> None:
        if fn.cls is None or attr is None or (fn.cls, attr) in self.attrs:
            return
        self.attrs.add((fn.cls, attr))
        for key, other in self.p.funcs.items():  # every method of the class that reads it
            if other.cls == fn.cls and key[0] == fn.key[0] and any(
                    _self_attr(n) == attr for n in ast.walk(other.node) if isinstance(n, ast.Attribute)):
                self.enter(key, set(), fn.key, again=True)

    def returned(self, fn: _Func) -> None:
        if fn.key in self.returns:
            return
        self.returns.add(fn.key)
        for key, other in self.p.funcs.items():  # its callers: their call results carry the value
            if key[0] == fn.key[0] and any(isinstance(n, ast.Call) and fn.key in self.p.resolve(n, other)[0]
                                           for n in ast.walk(other.node)):
                self.enter(key, set(), fn.key, again=True)


def _bound_from(n: ast.AST, names: set[str], fn: _Func, walk: _Walk) -> list[ast.AST]:
    """The targets ``n`` binds from a carrying value."""
    carries = walk.carries
    if isinstance(n, ast.Assign) and len(n.targets) == 1 and isinstance(n.targets[0], ast.Tuple) and isinstance(
            n.value, ast.Tuple) and len(n.targets[0].elts) == len(n.value.elts):  # a, b = x, y: pairwise
        return [t for t, v in zip(n.targets[0].elts, n.value.elts, strict=True) if carries(v, names, fn)]
    if isinstance(n, ast.Assign) and carries(n.value, names, fn):
        return list(n.targets)
    if isinstance(n, ast.AnnAssign | ast.AugAssign | ast.NamedExpr) and carries(n.value, names, fn):
        return [n.target]
    if isinstance(n, ast.For | ast.AsyncFor | ast.comprehension) and carries(n.iter, names, fn):
        return [n.target]
    if (isinstance(n, ast.Call) and isinstance(n.func, ast.Attribute) and n.func.attr in _ADDS
            and isinstance(n.func.value, ast.Name) and any(carries(a, names, fn) for a in n.args)):
        return [n.func.value]  # items.append(carrier): the container carries it
    if isinstance(n, ast.withitem) and n.optional_vars is not None and carries(n.context_expr, names, fn):
        return [n.optional_vars]
    if isinstance(n, ast.Match) and carries(n.subject, names, fn):
        return [ast.Name(id=c) for case in n.cases for p in ast.walk(case.pattern)
                for c in ([p.name] if isinstance(p, ast.MatchAs | ast.MatchStar) and p.name else [])]
    if isinstance(n, ast.FunctionDef | ast.AsyncFunctionDef) and n is not fn.node:
        if any(carries(b, names, fn) for stmt in n.body for b in ast.walk(stmt) if isinstance(b, ast.expr)):
            return [ast.Name(id=n.name)]
    return []


def _handed_on(project: _Project, fn: _Func, nxt: Fn | None) -> list[ast.AST]:
    """What ``fn`` hands to ``nxt``: the arguments of its calls of it, the values it stores on ``self``
    where ``nxt`` reads them, or what it returns (``nxt`` None, or one of its callers)."""
    nxt_func = project.funcs.get(nxt) if nxt is not None else None
    reads = {_self_attr(n) for n in ast.walk(nxt_func.node) if isinstance(n, ast.Attribute)} if nxt_func else set()
    returns_to = nxt_func is None or any(isinstance(n, ast.Call) and fn.key in project.resolve(n, nxt_func)[0]
                                         for n in ast.walk(nxt_func.node))
    out: list[ast.AST] = []
    for n in ast.walk(fn.node):
        if isinstance(n, ast.Call) and nxt is not None and nxt in project.resolve(n, fn)[0]:
            skip = 1 if isinstance(n.func, ast.Attribute) and n.func.attr in DISPATCH else 0
            out += [*n.args[skip:], *(k.value for k in n.keywords)]
        elif isinstance(n, ast.Assign) and any(_self_attr(t) in reads for t in n.targets if _self_attr(t)):
            out.append(n.value)
        elif (isinstance(n, ast.Call) and isinstance(n.func, ast.Attribute) and n.func.attr in _ADDS
              and _self_attr(n.func.value) in reads and _self_attr(n.func.value)):
            out += n.args
        elif isinstance(n, ast.Return) and n.value is not None and returns_to:
            out.append(n.value)
    return out


def _makers(walk: _Walk, fn: _Func, handed: list[ast.AST], carrying: set[str] | None) -> list[ast.Call]:
    """The calls of ``fn`` that make what it hands on from the value (``carrying``: its names that carry
    it; None: every name, for a maker the walk did not reach): calls given the value, inside ``handed``
    or inside what the carrying names ``handed`` reads were bound to (to a fixed point)."""
    everything = carrying is None
    if carrying is None:
        carrying = {n.id for n in ast.walk(fn.node) if isinstance(n, ast.Name)}

    def carries(node: ast.AST) -> bool:
        return everything or walk.carries(node, carrying, fn)

    wanted = {name for h in handed for name in _names(h)} & carrying
    sources: list[ast.AST] = [h for h in handed if carries(h)]
    bindings = [(targets, value) for n in ast.walk(fn.node) for targets, value in _bindings(n)]
    grew = True
    while grew:
        grew = False
        for targets, value in bindings:
            if wanted & targets and value not in sources and carries(value):
                sources.append(value)
                wanted |= set(_names(value)) & carrying
                grew = True
    if everything:  # only what makes the value itself: the outermost call of each source
        tops = [src.value if isinstance(src, ast.Await) else src for src in sources]
        return [c for c in tops if isinstance(c, ast.Call)]
    return [c for src in sources for c in ast.walk(src) if isinstance(c, ast.Call) and carries(c)]


def _bindings(n: ast.AST) -> list[tuple[set[str], ast.AST]]:
    """(names, value): ``n`` binds the names to (something made of) the value."""
    if isinstance(n, ast.Assign):
        return [({x for t in n.targets for x in _targets(t)}, n.value)]
    if isinstance(n, ast.AnnAssign | ast.AugAssign | ast.NamedExpr) and n.value is not None:
        return [(set(_targets(n.target)), n.value)]
    if isinstance(n, ast.For | ast.AsyncFor | ast.comprehension):
        return [(set(_targets(n.target)), n.iter)]
    if (isinstance(n, ast.Call) and isinstance(n.func, ast.Attribute) and n.func.attr in _ADDS
            and isinstance(n.func.value, ast.Name)):  # items.append(value)
        return [({n.func.value.id}, arg) for arg in n.args]
    if isinstance(n, ast.Match):
        return [({c.name for c in ast.walk(case.pattern) if isinstance(c, ast.MatchAs) and c.name}, n.subject)
                for case in n.cases]
    if isinstance(n, ast.FunctionDef | ast.AsyncFunctionDef):
        return [({n.name}, stmt) for stmt in n.body]
    return []


def follow(root: Path, roots: Iterable[str], start: Fn, seeds: set[str]) -> Flow:
    """Walk forward from ``start``, whose parameters ``seeds`` carry the value (see the module docstring)."""
    return _Walk(_Project(root, roots)).run(start, seeds)
