"""A job's life is one stream: every call that changes a job's state is made by a listener of the job table.

The scan (``ast``, over ``scheduler/``, ``estimator/`` and ``agent_engine/``) finds, with no list of
names written here:
- the job table's hooks: the methods of ``JobListener`` in ``scheduler/job_table.py``, and the
  listeners: every class that derives from it (directly or through another class);
- the holders of a job's life state: the classes that store a job's ``estimate`` or ``lease`` on its
  record (the estimator's tracker, the policy's lease table), and the classes built on them (a class
  whose ``self.<x>`` is built from a holder, as the estimator's ``self.jobs``);
- the calls that change a job's state: calls, from outside a holder, of a holder's mutating method (one
  that stores to an attribute of an object other than itself, or calls such a method on itself or on a
  holder it holds) on an object of that holder's class (as the code's annotations and assignments type
  the receiver: the code is typed), and stores, outside the table, to the record fields the table
  itself writes or clears for each event (``ended``, ``last_active``, ``ttl``, ``completion``, ...).
Each must sit in a listener's hook, in the table, or in a helper reached only from those; the one other
place allowed is a policy's step hooks (``on_time`` and the pressure hooks of ``SchedulingPolicy``: its
own decisions about what it holds, under time and memory pressure, not events of a job's life). No code
calls a hook itself: only the table publishes (by name, in ``JobTable._publish``).
"""

from __future__ import annotations

import ast
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from pathlib import Path

import pytest

pytestmark = pytest.mark.core

ROOT = Path(__file__).resolve().parent.parent
SCANNED = ("scheduler", "estimator", "agent_engine")
TABLE = "scheduler/job_table.py"
POLICY_BASE = "scheduler/policy/base.py"
LIFE_FIELDS = ("estimate", "lease")  # what the estimator and the policy keep of a job on its record


@dataclass
class Method:
    module: str
    cls: str  # "" for a module-level function
    name: str
    node: ast.FunctionDef | ast.AsyncFunctionDef


@dataclass
class Code:
    """The parsed modules: classes with their bases, methods, and what their ``self.<x>`` are built from."""

    classes: dict[str, list[str]] = field(default_factory=dict)  # class -> base names
    methods: dict[tuple[str, str], Method] = field(default_factory=dict)  # (class, name) -> method
    functions: list[Method] = field(default_factory=list)  # every function and method
    built: dict[tuple[str, str], str] = field(default_factory=dict)  # (class, attr) -> class it is built from

    @classmethod
    def parse(cls, sources: Iterable[tuple[str, str]]) -> Code:
        code = cls()
        for module, text in sources:
            tree = ast.parse(text)
            for node in tree.body:
                if isinstance(node, ast.ClassDef):
                    code.classes[node.name] = [_name(b) for b in node.bases]
                    for item in node.body:
                        if isinstance(item, ast.AnnAssign) and isinstance(item.target, ast.Name):
                            code.built[(node.name, item.target.id)] = _type_name(item.annotation)
                        if isinstance(item, ast.FunctionDef | ast.AsyncFunctionDef):
                            m = Method(module, node.name, item.name, item)
                            code.methods[(node.name, item.name)] = m
                            code.functions.append(m)
                            code._note_built(node.name, item)
                elif isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
                    code.functions.append(Method(module, "", node.name, node))
        return code

    def _note_built(self, cls: str, fn: ast.AST) -> None:
        for node in ast.walk(fn):
            if isinstance(node, ast.Assign) and isinstance(node.value, ast.Call):
                for target in node.targets:
                    if _is_self_attr(target):
                        self.built[(cls, target.attr)] = _name(node.value.func)  # type: ignore[union-attr]
            elif isinstance(node, ast.AnnAssign) and _is_self_attr(node.target):
                self.built[(cls, node.target.attr)] = _type_name(node.annotation)  # type: ignore[union-attr]

    def type_of(self, expr: ast.expr, m: Method, seen: frozenset[str] = frozenset()) -> str:
        """The class ``expr`` holds inside ``m``, as its annotations and assignments say ("" unknown):
        ``self``, a parameter, a local assigned once from a typed expression (or looping over a tuple:
        its first element's), ``self.<x>`` as built or annotated, a method's call by its return
        annotation."""
        if isinstance(expr, ast.Name):
            if expr.id == "self":
                return m.cls
            if expr.id in seen:
                return ""
            args = m.node.args
            for arg in (*args.posonlyargs, *args.args, *args.kwonlyargs):
                if arg.arg == expr.id and arg.annotation is not None:
                    return _type_name(arg.annotation)
            values = [n.value for n in ast.walk(m.node) if isinstance(n, ast.Assign)
                      and any(isinstance(t, ast.Name) and t.id == expr.id for t in n.targets)]
            values += [n.iter.elts[0] for n in ast.walk(m.node) if isinstance(n, ast.For)  # for x in (a, *b)
                       and isinstance(n.target, ast.Name) and n.target.id == expr.id
                       and isinstance(n.iter, ast.Tuple) and n.iter.elts]
            return self.type_of(values[0], m, seen | {expr.id}) if len(values) == 1 else ""
        if isinstance(expr, ast.Attribute):
            owner = self.type_of(expr.value, m, seen)
            return self.built.get((owner, expr.attr), "")
        if isinstance(expr, ast.Call) and isinstance(expr.func, ast.Attribute):
            method = self.methods.get((self.type_of(expr.func.value, m, seen), expr.func.attr))
            return _type_name(method.node.returns) if method is not None and method.node.returns else ""
        return ""

    def subclasses_of(self, root: str) -> set[str]:
        found = {root}
        while True:
            more = {c for c, bases in self.classes.items() if c not in found and found & set(bases)}
            if not more:
                return found
            found |= more


def _name(node: ast.expr) -> str:
    if isinstance(node, ast.Attribute):
        return node.attr
    if isinstance(node, ast.Name):
        return node.id
    if isinstance(node, ast.Subscript):
        return _name(node.value)
    return ""


def _type_name(annotation: ast.expr) -> str:
    """``Estimator`` of ``Estimator``, ``Estimator | None`` or ``"Estimator"``."""
    if isinstance(annotation, ast.Constant) and isinstance(annotation.value, str):
        return _type_name(ast.parse(annotation.value, mode="eval").body)
    if isinstance(annotation, ast.BinOp):
        left, right = _type_name(annotation.left), _type_name(annotation.right)
        return left if right == "None" else right if left == "None" else ""
    return _name(annotation)


def _is_self_attr(node: ast.expr) -> bool:
    return isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name) and node.value.id == "self"


def _root(node: ast.expr) -> str:
    """The name an attribute chain starts from (``record`` of ``record.estimate.pending``)."""
    while isinstance(node, ast.Attribute | ast.Subscript | ast.Call):
        node = node.func if isinstance(node, ast.Call) else node.value
    return node.id if isinstance(node, ast.Name) else ""


def _foreign(node: ast.Attribute) -> bool:
    """A store to another object's attribute (a record, an estimate, a lease), not to the holder's own."""
    return _root(node) != "self"


def _stores(fn: ast.AST) -> Iterator[ast.Attribute]:
    """The attributes ``fn`` assigns, augments or deletes (``x.a = ...``, ``x.a += ...``, ``del x.a``)."""
    for node in ast.walk(fn):
        targets: list[ast.expr] = []
        if isinstance(node, ast.Assign):
            targets = list(node.targets)
        elif isinstance(node, ast.AugAssign | ast.AnnAssign):
            targets = [node.target]
        elif isinstance(node, ast.Delete):
            targets = list(node.targets)
        for target in targets:
            for sub in ast.walk(target):
                if isinstance(sub, ast.Attribute) and isinstance(sub.ctx, ast.Store | ast.Del):
                    yield sub


def _self_calls(fn: ast.AST) -> Iterator[tuple[str | None, str]]:
    """``(None, m)`` for each ``self.m(...)`` and ``(x, m)`` for each ``self.x.m(...)`` in ``fn``."""
    for node in ast.walk(fn):
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute):
            owner = node.func.value
            if isinstance(owner, ast.Name) and owner.id == "self":
                yield None, node.func.attr
            elif _is_self_attr(owner):
                yield owner.attr, node.func.attr  # type: ignore[union-attr]


def holders(code: Code) -> set[str]:
    """Classes (not listeners: those are what is checked) that store a job's life state on its record,
    and the classes built on them."""
    listeners = code.subclasses_of("JobListener")
    found = {m.cls for m in code.functions if m.cls and m.cls != "JobTable" and m.cls not in listeners
             and any(a.attr in LIFE_FIELDS and _foreign(a) for a in _stores(m.node))}
    while True:
        more = {cls for (cls, _), built in code.built.items()
                if built in found and cls not in found and cls not in listeners}
        if not more:
            return found
        found |= more


def mutators(code: Code, holder_classes: set[str]) -> dict[str, set[str]]:
    """Per holder, its methods that change state (see the module docstring), to a fixed point."""
    out: dict[str, set[str]] = {c: set() for c in holder_classes}
    for (cls, name), m in code.methods.items():
        if cls in out and name != "__init__" and any(_foreign(a) for a in _stores(m.node)):
            out[cls].add(name)
    changed = True
    while changed:
        changed = False
        for (cls, name), m in code.methods.items():
            if cls not in out or name == "__init__" or name in out[cls]:
                continue
            for attr, called in _self_calls(m.node):
                target = cls if attr is None else code.built.get((cls, attr))
                if target in out and called in out[target]:
                    out[cls].add(name)
                    changed = True
                    break
    return out


def event_fields(table_source: str) -> set[str]:
    """The record fields the table writes or clears for its events (stores to non-self attributes)."""
    return {a.attr for a in _stores(ast.parse(table_source)) if _foreign(a)}


@dataclass(frozen=True)
class Site:
    where: str  # module:Class.method
    what: str

    def __str__(self) -> str:
        return f"{self.where}: {self.what}"


def job_state_changes(code: Code, table_source: str) -> list[tuple[Method, str]]:
    """Every call of a holder's mutator from outside the holders, and every store of an event field
    outside the table: ``(the function it is in, what it does)``."""
    hold = holders(code)
    muts = mutators(code, hold)
    fields = event_fields(table_source)
    found: list[tuple[Method, str]] = []
    for m in code.functions:
        if m.cls in hold or m.module == TABLE:
            continue
        for node in ast.walk(m.node):
            if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and \
                    node.func.attr in muts.get(code.type_of(node.func.value, m), ()):
                found.append((m, f"calls {ast.unparse(node.func)}"))
        found += [(m, f"stores {ast.unparse(a)}") for a in _stores(m.node) if a.attr in fields and _foreign(a)]
    return found


def violations(code: Code, table_source: str, policy_step_hooks: set[str]) -> list[Site]:
    """The job-state changes that are neither in a listener's hook (or a helper only hooks reach) nor
    in a policy's step hook."""
    hooks = {n.name for n in ast.parse(table_source).body if isinstance(n, ast.ClassDef) and n.name == "JobListener"
             for n in n.body if isinstance(n, ast.FunctionDef)}
    listeners = code.subclasses_of("JobListener")
    policies = code.subclasses_of("SchedulingPolicy")

    def allowed(cls: str, name: str, seen: frozenset[tuple[str, str]] = frozenset()) -> bool:
        if cls in listeners and name in hooks or cls in policies and name in policy_step_hooks:
            return True
        if not cls or (cls, name) in seen:
            return False
        callers = [m for (c, _), m in code.methods.items() if c == cls
                   and any(attr is None and called == name for attr, called in _self_calls(m.node))]
        return bool(callers) and all(allowed(cls, c.name, seen | {(cls, name)}) for c in callers)

    return [Site(f"{m.module}:{m.cls}.{m.name}" if m.cls else f"{m.module}:{m.name}", what)
            for m, what in job_state_changes(code, table_source) if not allowed(m.cls, m.name)]


def _sources() -> Iterator[tuple[str, str]]:
    for top in SCANNED:
        for path in sorted((ROOT / top).rglob("*.py")):
            yield str(path.relative_to(ROOT)), path.read_text()


def _step_hooks() -> set[str]:
    """The policy's abstract ``on_*`` hooks: the scheduler calls them at named points of a step."""
    tree = ast.parse((ROOT / POLICY_BASE).read_text())
    policy = next(n for n in tree.body if isinstance(n, ast.ClassDef) and n.name == "SchedulingPolicy")
    return {f.name for f in policy.body if isinstance(f, ast.FunctionDef) and f.name.startswith("on_")
            and any(_name(d) == "abstractmethod" for d in f.decorator_list)}


@pytest.fixture(scope="module")
def code() -> Code:
    return Code.parse(_sources())


@pytest.fixture(scope="module")
def table_source() -> str:
    return (ROOT / TABLE).read_text()


def test_every_call_that_changes_a_jobs_state_is_made_by_a_listener_of_the_job_table(
        code: Code, table_source: str) -> None:
    changes = job_state_changes(code, table_source)
    where = {f"{m.cls}.{m.name}" for m, _ in changes}
    # Not vacuous: the estimator's and the policy's hooks are found changing state, each by the table's event.
    assert {"JobHooks.on_job_arrival", "JobHooks.on_turn_end", "JobHooks._end_job", "ContinuumPolicy.on_turn_end",
            "ContinuumPolicy.on_job_admitted", "ContinuumPolicy.on_turn_abort"} <= where, sorted(where)
    assert {"JobTracker", "LeaseTable", "Estimator"} <= holders(code)
    assert _step_hooks() == {"on_time", "on_allocation_failed", "on_admission_blocked"}
    bad = violations(code, table_source, _step_hooks())
    assert not bad, "job state changed outside the job table's listeners:\n" + "\n".join(map(str, bad))


def test_only_the_table_tells_a_listener(code: Code, table_source: str) -> None:
    hooks = {n.name for n in ast.parse(table_source).body if isinstance(n, ast.ClassDef) and n.name == "JobListener"
             for n in n.body if isinstance(n, ast.FunctionDef)}
    assert {"on_job_arrival", "on_job_admitted", "on_turn_end", "on_turn_abort", "on_job_release"} <= hooks
    direct = [f"{m.module}:{m.cls}.{m.name}" for m in code.functions for node in ast.walk(m.node)
              if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr in hooks]
    assert direct == [], direct


def test_the_scan_finds_a_job_state_change_outside_the_listeners() -> None:
    """The scan itself: a callback that records a turn from the policy (as ``pin_ttl_fn`` did) is found."""
    source = '''
class JobTracker:
    def finish_turn(self, job_id, turn):
        record = self.table.record(job_id)
        record.estimate = turn

class Estimator:
    def __init__(self):
        self.jobs = JobTracker()
    def on_turn_finished(self, job_id, turn):
        self.jobs.finish_turn(job_id, turn)

class Hooks(JobListener):
    est: Estimator
    def on_turn_end(self, record, request, now):
        self._record(request)
    def _record(self, request):
        self.est.on_turn_finished(request.job_id, 1)
    def pin_ttl(self, request):
        self.est.on_turn_finished(request.job_id, 2)
        request.record.ttl = 5.0
'''
    code = Code.parse([("x.py", source)])
    table = "class JobListener:\n    def on_turn_end(self, record, request, now): ...\n" \
            "def publish(rec):\n    rec.ttl = 0.0\n"
    assert holders(code) == {"JobTracker", "Estimator"}
    bad = [str(s) for s in violations(code, table, set())]
    assert bad == ["x.py:Hooks.pin_ttl: calls self.est.on_turn_finished", "x.py:Hooks.pin_ttl: stores request.record.ttl"]
