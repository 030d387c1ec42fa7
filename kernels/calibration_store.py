"""Measured kernel routes, cached on disk per CPU, build, torch, thread count and shape.

A route choice measured on one machine is never applied to another: every calibration is stored under
a key that hashes what its result depends on (its kind and version, the CPU model and features, the
kernels' variant and build, torch, the thread count and the shape it was measured for), in
``<cache>/kernels/routes/<key>.json``.

Invariants:
- :func:`crossover_size` is the smallest measured size from which the second route wins (by more than
  ``margin``) at it and at every larger measured size; ``NEVER`` when it does not win at the largest.
- A stored result is used only under the exact key it was measured under (:func:`read_calibration` checks the
  key written inside the file against its name); files are written atomically, and an unreadable
  or unparsable one is measured again and rewritten (:func:`stored_or_measured`).
"""

from __future__ import annotations

import hashlib
import json
import os
import tempfile
from collections.abc import Callable, Sequence
from dataclasses import asdict
from pathlib import Path
from typing import TYPE_CHECKING, TypeVar

import torch

from kernels.cpp_build import cache_dir, library_path
from kernels.isa import cpu_flags, cpu_model, selected_variant

NEVER = 1 << 30  # a size no call reaches: the first route always
if TYPE_CHECKING:
    from _typeshed import DataclassInstance

Cal = TypeVar("Cal", bound="DataclassInstance")  # a calibration: a dataclass, stored as its fields


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
    parts = [kind, str(version), cpu_model(), " ".join(sorted(cpu_flags())), library_path(selected_variant()).name,
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
