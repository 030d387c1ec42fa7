"""One owner per job: no dict or set keyed by job id outside the job table.

Every per-job fact lives on the job's ``JobRecord`` in ``scheduler.job_table``; a component may keep an
index of records (keyed by the record, its lease or its tier residency), never a second map of job
ids. The scan reads the source of ``scheduler/``, ``estimator/``, ``agent_engine/engine/``,
``agent_engine/routing/``, ``agent_engine/server/`` and ``agent_engine/sim/``. A container is a dict or set (``dict``, ``OrderedDict``, ``defaultdict``,
``Counter``, ``set``, by annotation or by the value built; a name the module imports from elsewhere,
such as Prometheus' ``Counter``, is not one) bound to an attribute, a class field or a
module-level name: state that outlives a call (a function's local is a temporary, and a ``frozenset``
a value, not a holder). It is keyed by job id when
- its name mentions a job (``by_job``, ``_jobs``) and its key type is a string (or not annotated), or
- anywhere in its module it is indexed, looked up, popped, added to or tested with ``in`` by an
  expression naming a job id (``job_id``, ``job``, ``req.job_id``, ``exclude_job``).
The exceptions are listed below, each justified in ``docs/architecture.md`` (the test checks that
the document names each one, and that each one is still found: a stale exception fails too).
"""

from __future__ import annotations

import ast
import re
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

pytestmark = pytest.mark.core

ROOT = Path(__file__).resolve().parent.parent
SCANNED = ("scheduler", "estimator", "agent_engine/engine", "agent_engine/routing", "agent_engine/server",
           "agent_engine/sim")
TABLE = "scheduler/job_table.py"  # the one owner
ARCHITECTURE = ROOT / "docs" / "architecture.md"

# path:Owner.name -> why it may be keyed by job id (the same reason, longer, is in docs/architecture.md).
EXCEPTIONS = {
    "scheduler/job_index.py:JobIndex._turns": "the prefix-chain index's entries, one per job between turns",
    "agent_engine/routing/policies.py:AffinityPolicy._homes": "the cluster router's table, above the replicas",
    "agent_engine/server/open_jobs.py:OpenJobs._jobs": "each tenant's open jobs, counted at the edge on the event loop",
}

_CONTAINERS = {"dict", "Dict", "OrderedDict", "defaultdict", "Counter", "set", "Set", "MutableMapping",
               "MutableSet"}
_KEYING_METHODS = {"get", "pop", "setdefault", "add", "discard", "remove", "move_to_end", "__getitem__"}
_JOB_NAME = re.compile(r"(^|_)jobs?($|_)", re.IGNORECASE)
_STR_KEYS = {"str", "str | None", "Optional[str]", "None | str"}


@dataclass(frozen=True)
class Container:
    owner: str  # the class it is an attribute or a field of; "" at module level
    name: str
    key_type: str | None  # the annotation's first argument, as written (None: not annotated)

    @property
    def label(self) -> str:
        return f"{self.owner}.{self.name}" if self.owner else self.name


def _outer_name(node: ast.expr) -> str | None:
    """``OrderedDict`` of ``collections.OrderedDict[str, int]``; None for anything else."""
    if isinstance(node, ast.Subscript):
        node = node.value
    if isinstance(node, ast.Attribute):
        return node.attr
    if isinstance(node, ast.Name):
        return node.id
    return None


def _key_type(annotation: ast.expr) -> str | None:
    if isinstance(annotation, ast.Subscript):
        arg = annotation.slice
        first = arg.elts[0] if isinstance(arg, ast.Tuple) else arg
        return ast.unparse(first)
    return None


def _builds_container(value: ast.expr | None) -> bool:
    if isinstance(value, ast.Dict | ast.Set | ast.DictComp | ast.SetComp):
        return True
    if isinstance(value, ast.Call):
        if _outer_name(value.func) in _CONTAINERS:
            return True
        # dataclasses.field(default_factory=dict)
        return any(k.arg == "default_factory" and _outer_name(k.value) in _CONTAINERS for k in value.keywords)
    return False


def _assignments(tree: ast.Module) -> Iterator[tuple[str, ast.expr, ast.Assign | ast.AnnAssign]]:
    """(owner, target, statement) for every assignment that outlives a call: ``self.x`` in a method (its
    class), a class field (its class) or a module-level name (no owner); a function's locals are left out."""
    def walk(node: ast.AST, cls: str, func: str) -> Iterator[tuple[str, ast.expr, ast.Assign | ast.AnnAssign]]:
        for child in ast.iter_child_nodes(node):
            if isinstance(child, ast.ClassDef):
                yield from walk(child, child.name, "")
            elif isinstance(child, ast.FunctionDef | ast.AsyncFunctionDef):
                yield from walk(child, cls, child.name)
            else:
                if isinstance(child, ast.Assign | ast.AnnAssign):
                    for target in child.targets if isinstance(child, ast.Assign) else [child.target]:
                        is_self = isinstance(target, ast.Attribute) and isinstance(target.value, ast.Name) \
                            and target.value.id == "self"
                        if is_self or not func:
                            yield cls, target, child
                yield from walk(child, cls, func)
    yield from walk(tree, "", "")


def _target_name(target: ast.expr) -> str | None:
    if isinstance(target, ast.Attribute) and isinstance(target.value, ast.Name) and target.value.id == "self":
        return target.attr
    if isinstance(target, ast.Name):
        return target.id
    return None


def _borrowed_names(tree: ast.Module) -> set[str]:
    """Container-like names the module imports from elsewhere than ``collections``/``typing`` (a
    Prometheus ``Counter`` is a metric, not a dict)."""
    return {alias.asname or alias.name for node in ast.walk(tree) if isinstance(node, ast.ImportFrom)
            and node.module not in ("collections", "collections.abc", "typing") for alias in node.names} & _CONTAINERS


def containers(tree: ast.Module) -> list[Container]:
    """Every dict or set bound to an attribute, a class field or a module-level name."""
    found: dict[tuple[str, str], Container] = {}
    borrowed = _borrowed_names(tree)
    for owner, target, stmt in _assignments(tree):
        name = _target_name(target)
        if name is None:
            continue
        if isinstance(stmt, ast.AnnAssign) and _outer_name(stmt.annotation) in _CONTAINERS - borrowed:
            found[(owner, name)] = Container(owner, name, _key_type(stmt.annotation))
        elif _builds_container(stmt.value) and (owner, name) not in found and not (
                isinstance(stmt.value, ast.Call) and _outer_name(stmt.value.func) in borrowed):
            found[(owner, name)] = Container(owner, name, None)
    return list(found.values())


def _names_a_job_id(node: ast.expr) -> bool:
    """``job_id``, ``job``, ``req.job_id``, ``exclude_job``: an expression that reads as a job id."""
    ident = node.id if isinstance(node, ast.Name) else node.attr if isinstance(node, ast.Attribute) else None
    return ident is not None and (ident in ("job", "job_id") or ident.endswith(("_job", "_job_id")))


def _container_name(node: ast.expr) -> str | None:
    if isinstance(node, ast.Attribute):
        return node.attr
    if isinstance(node, ast.Name):
        return node.id
    return None


def keyed_by_job_id(tree: ast.Module) -> set[str]:
    """Names of the containers that some expression of the module keys by a job id."""
    keyed: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Subscript) and _names_a_job_id(node.slice):
            keyed.add(_container_name(node.value) or "")
        elif (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute)
              and node.func.attr in _KEYING_METHODS and node.args and _names_a_job_id(node.args[0])):
            keyed.add(_container_name(node.func.value) or "")
        elif isinstance(node, ast.Compare) and _names_a_job_id(node.left):
            for op, right in zip(node.ops, node.comparators, strict=True):
                if isinstance(op, ast.In | ast.NotIn):
                    keyed.add(_container_name(right) or "")
    keyed.discard("")
    return keyed


def job_keyed_containers(source: str) -> list[str]:
    """The labels (``Owner.name``) of the module's containers keyed by job id, sorted."""
    tree = ast.parse(source)
    keyed = keyed_by_job_id(tree)
    out = []
    for c in containers(tree):
        named = bool(_JOB_NAME.search(c.name)) and (c.key_type is None or c.key_type in _STR_KEYS)
        if named or c.name in keyed:
            out.append(c.label)
    return sorted(out)


def scan(root: Path = ROOT) -> set[str]:
    """``path:Owner.name`` of every container keyed by job id in the scanned folders, the table's aside."""
    found = set()
    for folder in SCANNED:
        for path in sorted((root / folder).rglob("*.py")):
            rel = path.relative_to(root).as_posix()
            if rel == TABLE:
                continue
            found.update(f"{rel}:{label}" for label in job_keyed_containers(path.read_text(encoding="utf-8")))
    return found


# ---- the rule itself -------------------------------------------------------------------------------
PLANTED = '''
from collections import OrderedDict
from dataclasses import dataclass, field

LAST_SEEN: dict[str, float] = {}                    # a module-level map keyed by job id below

class Holder:
    def __init__(self) -> None:
        self.by_job: dict[str, int] = {}            # named for jobs, string keys
        self.waits = {}                             # keyed by a job id below
        self.seen: set[str] = set()                 # added to by a job id below
        self.by_tenant: dict[str | None, int] = {}  # keyed by tenant: fine
        self.requests: dict[str, int] = {}          # keyed by request id: fine
        self.index: dict[object, None] = {}         # an index of records: fine

    def touch(self, req, job_id: str, record) -> None:
        self.waits[req.job_id] = 1
        self.seen.add(job_id)
        self.by_tenant[req.tenant] = 1
        self.requests[req.request_id] = 1
        self.index[record] = None
        LAST_SEEN[job_id] = 0.0
        pending = {}                                # a local: a temporary, not state
        if job_id not in pending:
            pending[job_id] = 0

@dataclass
class Tracked:
    _jobs: OrderedDict[str, int] = field(default_factory=OrderedDict)
    _records: OrderedDict[object, None] = field(default_factory=OrderedDict)
'''


def test_the_rule_finds_a_planted_job_keyed_dict_and_leaves_other_keys_alone() -> None:
    assert job_keyed_containers(PLANTED) == ["Holder.by_job", "Holder.seen", "Holder.waits", "LAST_SEEN",
                                             "Tracked._jobs"]


def test_the_check_fails_on_a_planted_module_in_a_scanned_folder(tmp_path: Path) -> None:
    (tmp_path / "scheduler").mkdir()
    (tmp_path / "scheduler" / "planted.py").write_text(PLANTED, encoding="utf-8")
    (tmp_path / "scheduler" / "job_table.py").write_text(PLANTED, encoding="utf-8")  # the owner: not scanned
    assert scan(tmp_path) - EXCEPTIONS.keys() == {f"scheduler/planted.py:{label}" for label in (
        "Holder.by_job", "Holder.seen", "Holder.waits", "LAST_SEEN", "Tracked._jobs")}


def test_the_rule_sees_the_per_job_maps_this_table_replaced() -> None:
    old_tier = "class KVTier:\n    def __init__(self):\n        self.last_active: dict[str, float] = {}\n" \
               "    def job_active(self, job_id, now):\n        self.last_active[job_id] = now\n"
    old_prefetch = "class P:\n    def __init__(self):\n        self.due: dict[str, float] = {}\n" \
                   "    def f(self, job):\n        return self.due.get(job)\n"
    old_leases = "class L:\n    def __init__(self):\n        self.leases: dict[str, object] = {}\n" \
                 "    def has(self, job_id):\n        return job_id in self.leases\n"
    assert job_keyed_containers(old_tier) == ["KVTier.last_active"]
    assert job_keyed_containers(old_prefetch) == ["P.due"]
    assert job_keyed_containers(old_leases) == ["L.leases"]


def test_a_metric_named_for_jobs_is_not_a_container_but_a_counter_of_collections_is() -> None:
    metric = "from prometheus_client import Counter\nclass M:\n    def __init__(self):\n" \
             "        self.jobs_released = Counter('jobs_released', 'DELETE calls')\n"
    counted = "from collections import Counter\nclass M:\n    def __init__(self):\n" \
              "        self.jobs_seen = Counter()\n"
    assert job_keyed_containers(metric) == [] and job_keyed_containers(counted) == ["M.jobs_seen"]


# ---- the code --------------------------------------------------------------------------------------
def test_no_dict_keyed_by_job_id_outside_the_job_table() -> None:
    found = scan()
    assert found - EXCEPTIONS.keys() == set(), "keep per-job state on the JobRecord (scheduler/job_table.py)"
    assert EXCEPTIONS.keys() - found == set(), "a listed exception is gone: drop it here and in the docs"


def test_every_exception_is_justified_in_the_architecture_doc() -> None:
    doc = ARCHITECTURE.read_text(encoding="utf-8")
    for exception in EXCEPTIONS:
        path, _, label = exception.partition(":")
        assert f"`{path}`" in doc and f"`{label}`" in doc, f"{exception} is not justified in {ARCHITECTURE.name}"
