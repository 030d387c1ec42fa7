"""Shared pytest configuration: the ``gpu`` marker skips without CUDA; no test leaves a forced kernel
variant's caps of torch's libraries in the environment of the next."""

from __future__ import annotations

import os
from collections.abc import Iterator

import pytest

from kernels.isa import CAPPED_NAMES


@pytest.fixture(autouse=True)
def _library_caps_restored() -> Iterator[None]:
    """``isa.cap_libraries`` (run wherever a test forces a variant) writes ``os.environ``: each such
    variable is put back as it was when the test began."""
    before = {name: os.environ.get(name) for name in CAPPED_NAMES}
    yield
    for name, value in before.items():
        if value is None:
            os.environ.pop(name, None)
        else:
            os.environ[name] = value


def _cuda_available() -> bool:
    try:
        import torch
    except ImportError:
        return False
    return torch.cuda.is_available()


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    gpu_items = [item for item in items if "gpu" in item.keywords]
    if not gpu_items or _cuda_available():
        return
    skip = pytest.mark.skip(reason="needs CUDA")
    for item in gpu_items:
        item.add_marker(skip)
