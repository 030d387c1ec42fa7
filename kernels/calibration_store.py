"""Measured kernel routes, cached on disk per CPU, build, torch, thread count and shape.

A route choice measured on one machine is never applied to another: every calibration is stored under
a key that hashes what its result depends on (its kind and version, the CPU model and features, the
kernels' variant and build, torch, the thread count and the shape it was measured for), in
``<cache>/kernels/routes/<key>.json``.

Invariants:
- :func:`crossover_size` is the smallest measured size from which the second route wins (by more than
  ``margin``) at it and at every larger measured size; ``NEVER`` when it does not win at the largest.
- A :class:`RouteTable` answers from what this process calibrated, never by measuring: a lookup on a
  step's path is one dict access.
- A stored result is used only under the exact key it was measured under (:func:`read_calibration` checks the
  key written inside the file against its name); files are written atomically, and an unreadable
  or unparsable one is measured again and rewritten (:func:`stored_or_measured`).
- A stored result is trusted only within physical bounds: every timing a finite number of
  milliseconds in ``[0, MAX_MS]`` (:func:`checked_ms`), every crossover ``NEVER`` or one of the sizes
  its own table measured (:func:`checked_threshold`); anything else (a tampered or corrupt file) is
  treated as missing: measured again, with one warning.
- A calibration that cannot be written (a read-only cache, a folder where its file should be, a full
  disk) stays in this process's memory under its key, with one warning per key; no temporary file is
  left behind, and start-up goes on.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import logging
import math
import os
import tempfile
import threading
from collections.abc import Callable, Collection, Hashable, Iterator, Sequence
from dataclasses import asdict
from pathlib import Path
from typing import TYPE_CHECKING, Generic, TypeVar

import torch

from kernels.amx import amx_state
from kernels.amx import describe as describe_amx
from kernels.cpp_build import active_variant, cache_dir, library_path
from kernels.isa import cpu_model, library_caps_set, routing_flags, selected_variant

NEVER = 1 << 30  # a size no call reaches: the first route always
MAX_MS = 60_000.0  # no timed call of a calibration takes a minute: a stored timing over it is no measurement
if TYPE_CHECKING:
    from _typeshed import DataclassInstance

Cal = TypeVar("Cal", bound="DataclassInstance")  # a calibration: a dataclass, stored as its fields
Shape = TypeVar("Shape", bound=Hashable)
Route = TypeVar("Route")
logger = logging.getLogger(__name__)
_unstored: dict[str, dict[str, object]] = {}  # key -> a calibration that could not be written (this process)
_unstored_lock = threading.Lock()


def crossover_size(sizes: Sequence[int], first_s: Sequence[float], second_s: Sequence[float], margin: float) -> int:
    """The smallest size from which the second route beats the first by ``margin`` at every larger size
    too (sizes ascending); ``NEVER`` when it does not win at the largest."""
    threshold = NEVER
    for size, first, second in reversed(list(zip(sizes, first_s, second_s, strict=True))):
        if second * (1 + margin) >= first:
            break
        threshold = size
    return threshold


def store_key(kind: str, version: int, shape: dict[str, object], threads: int) -> str:
    """What a calibration of ``kind`` depends on: CPU model and features as the routes see them (a forced
    variant's, ``isa.routing_flags``), whether the OS granted the AMX tiles the CPU lists
    (``kernels.amx``), the kernels' variant and build, the caps on torch's libraries in this
    environment (``isa.LIBRARY_CAPS``), torch, threads and the shape (its fields as a dict)."""
    library = library_path(active_variant() or selected_variant()).name
    parts = [kind, str(version), cpu_model(), " ".join(sorted(routing_flags())), library,
             torch.__version__, str(threads), json.dumps(shape, sort_keys=True)]
    if amx_state().listed:  # a CPU without AMX keeps the keys it had before the tiles were asked about
        parts.append(describe_amx())
    caps = library_caps_set()
    if caps:  # likewise an uncapped environment
        parts.append(json.dumps(caps, sort_keys=True))
    return hashlib.sha256("\0".join(parts).encode()).hexdigest()[:20]


def store_path(key: str) -> Path:
    return cache_dir() / "routes" / f"{key}.json"


def read_calibration(key: str) -> dict[str, object] | None:
    """The calibration under ``key``: this process's own if it could not be written, else the stored one,
    or None (absent, unreadable, or stored under another key)."""
    with _unstored_lock:
        kept = _unstored.get(key)
    if kept is not None:
        return kept
    try:
        data = json.loads(store_path(key).read_text())
    except (OSError, ValueError):
        return None
    return data if isinstance(data, dict) and data.get("key") == key else None


def write_calibration(key: str, data: dict[str, object]) -> bool:
    """Store ``data`` (with its ``key`` field) atomically under ``key``; True when written. A store that
    cannot be written keeps it in memory (:func:`read_calibration` answers it) with one warning per key
    and no file left behind."""
    path, tmp, entry = store_path(key), None, {**data, "key": key}
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(suffix=".json", dir=path.parent)
        with os.fdopen(fd, "w") as f:
            json.dump(entry, f, indent=1)
        os.replace(tmp, path)
    except OSError as exc:
        if tmp is not None:
            with contextlib.suppress(OSError):
                os.unlink(tmp)
        with _unstored_lock:
            first = key not in _unstored
            _unstored[key] = entry
        if first:
            logger.warning("cannot store the kernel calibration %s (%s: %s): keeping it in memory for this process",
                           path, type(exc).__name__, exc)
        return False
    with _unstored_lock:
        _unstored.pop(key, None)
    return True


def checked_ms(table: object, columns: Collection[int], infinite: Collection[int] = ()) -> dict[str, tuple[float, ...]]:
    """A stored timing table (size -> milliseconds per route) if it is one a measurement could have made,
    else ``ValueError``: sizes positive integers, each row of a length in ``columns``, each timing a
    finite number in ``[0, MAX_MS]`` (``+inf`` allowed in the ``infinite`` columns: a route this build
    does not have)."""
    if not isinstance(table, dict) or not table:
        raise ValueError("no timing table")
    out = {}
    for size, row in table.items():
        if not (isinstance(size, str) and size.isdecimal() and int(size) > 0):
            raise ValueError(f"size {size!r} is not a positive integer")
        if not isinstance(row, list | tuple) or len(row) not in columns:
            raise ValueError(f"the timings at size {size} are not {' or '.join(map(str, columns))} numbers")
        for i, ms in enumerate(row):
            if isinstance(ms, bool) or not isinstance(ms, int | float):
                raise ValueError(f"timing {ms!r} at size {size} is not a number")
            if not (0 <= ms <= MAX_MS or (i in infinite and ms == math.inf)):
                raise ValueError(f"timing {ms!r} ms at size {size} is outside [0, {MAX_MS:g}]")
        out[size] = tuple(float(ms) for ms in row)
    return out


def checked_threshold(value: object, ms: dict[str, tuple[float, ...]]) -> int:
    """A stored crossover if it is ``NEVER`` or a size of its own timing table ``ms`` (where
    :func:`crossover_size` puts one), else ``ValueError``."""
    if isinstance(value, bool) or not isinstance(value, int) or (value != NEVER and str(value) not in ms):
        raise ValueError(f"crossover {value!r} is neither NEVER nor a measured size")
    return value


@contextlib.contextmanager
def measuring_alone(key: str) -> Iterator[None]:
    """Hold an exclusive lock on ``key``'s entry (``<key>.lock`` beside it, left in place) while the
    caller reads or measures it: another process on this machine after the same key waits, then reads
    what this one stored instead of measuring while this one does. Where no lock file can be opened (a
    read-only store), nothing is locked."""
    try:
        import fcntl

        path = store_path(key).with_suffix(".lock")
        path.parent.mkdir(parents=True, exist_ok=True)
        lock = open(path, "a")  # noqa: SIM115 - held for the body below
    except (ImportError, OSError):
        yield
        return
    with lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        yield


def stored_or_measured(key: str, parse: Callable[[dict[str, object]], Cal], measure: Callable[[], Cal],
                       remeasure: bool = False) -> Cal:
    """The calibration stored under ``key`` as ``parse`` reads it, unless ``remeasure`` or the file is
    missing or unusable (``parse`` raising KeyError, TypeError or ValueError: malformed, or outside the
    bounds above, with a warning); then ``measure()``, stored under ``key`` (or kept in memory)."""
    data = None if remeasure else read_calibration(key)
    if data is not None:
        try:
            return parse(data)
        except (KeyError, TypeError, ValueError) as exc:
            logger.warning("the stored kernel calibration %s is unusable (%s: %s): measuring again",
                           store_path(key), type(exc).__name__, exc)
    cal = measure()
    write_calibration(key, asdict(cal))
    return cal


class RouteTable(Generic[Shape, Route]):
    """The routes this process knows for one kind of calibration, by (shape, thread count): each one read
    from the store or measured by :meth:`calibrate`, answered by :meth:`get` in one dict lookup."""

    def __init__(self, what: str) -> None:
        self.what = what  # for the log line of a measurement, e.g. "where matmuls leave the panels"
        self.known: dict[tuple[Shape, int], Route] = {}
        self._lock = threading.Lock()

    def calibrate(self, shape: Shape, key_of: Callable[[int], str], parse: Callable[[dict[str, object]], Cal],
                  measure: Callable[[], Cal], route_of: Callable[[Cal], Route], remeasure: bool = False) -> Cal:
        """``shape``'s calibration at the current thread count (``key_of(threads)`` its store key): stored,
        unless ``remeasure`` or unreadable, else ``measure()`` now and stored; its route is known after."""
        threads = torch.get_num_threads()

        def measure_now() -> Cal:
            logger.info("measuring %s for %s (%d threads)", self.what, shape, threads)
            return measure()

        cal = stored_or_measured(key_of(threads), parse, measure_now, remeasure)
        with self._lock:
            self.known[(shape, threads)] = route_of(cal)
        return cal

    def get(self, shape: Shape, default: Route) -> Route:
        """The route known for ``shape`` at the current thread count, else ``default`` (never measures)."""
        return self.known.get((shape, torch.get_num_threads()), default)
