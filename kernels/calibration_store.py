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
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
import tempfile
import threading
from collections.abc import Callable, Hashable, Sequence
from dataclasses import asdict
from pathlib import Path
from typing import TYPE_CHECKING, Generic, TypeVar

import torch

from kernels.cpp_build import active_variant, cache_dir, library_path
from kernels.isa import cpu_flags, cpu_model, selected_variant

NEVER = 1 << 30  # a size no call reaches: the first route always
if TYPE_CHECKING:
    from _typeshed import DataclassInstance

Cal = TypeVar("Cal", bound="DataclassInstance")  # a calibration: a dataclass, stored as its fields
Shape = TypeVar("Shape", bound=Hashable)
Route = TypeVar("Route")
logger = logging.getLogger(__name__)


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
    """What a calibration of ``kind`` depends on: CPU model and features, the kernels' variant and
    build, torch, threads and the shape (its fields as a dict)."""
    library = library_path(active_variant() or selected_variant()).name
    parts = [kind, str(version), cpu_model(), " ".join(sorted(cpu_flags())), library,
             torch.__version__, str(threads), json.dumps(shape, sort_keys=True)]
    return hashlib.sha256("\0".join(parts).encode()).hexdigest()[:20]


def store_path(key: str) -> Path:
    return cache_dir() / "routes" / f"{key}.json"


def read_calibration(key: str) -> dict[str, object] | None:
    """The stored calibration under ``key``, or None (absent, unreadable, or stored under another key)."""
    try:
        data = json.loads(store_path(key).read_text())
    except (OSError, ValueError):
        return None
    return data if isinstance(data, dict) and data.get("key") == key else None


def write_calibration(key: str, data: dict[str, object]) -> None:
    """Store ``data`` (with its ``key`` field) atomically under ``key``."""
    path = store_path(key)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(suffix=".json", dir=path.parent)
    with os.fdopen(fd, "w") as f:
        json.dump({**data, "key": key}, f, indent=1)
    os.replace(tmp, path)


def stored_or_measured(key: str, parse: Callable[[dict[str, object]], Cal], measure: Callable[[], Cal],
                       remeasure: bool = False) -> Cal:
    """The calibration stored under ``key`` as ``parse`` reads it, unless ``remeasure`` or the file is
    missing or unparsable (``parse`` raising KeyError, TypeError or ValueError); then ``measure()``,
    stored under ``key``."""
    data = None if remeasure else read_calibration(key)
    if data is not None:
        try:
            return parse(data)
        except (KeyError, TypeError, ValueError):
            pass
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
