"""Cache directory resolution for agent-engine.

Invariant: every cached artefact lives under ``cache_root()``; the root is chosen only from the
environment (``AGENT_ENGINE_CACHE``, then ``XDG_CACHE_HOME/agent-engine``, then
``~/.cache/agent-engine``), never from the current working directory, so every process on a machine
agrees on it.
"""

from __future__ import annotations

import os
from pathlib import Path

ENV_CACHE = "AGENT_ENGINE_CACHE"


def cache_root() -> Path:
    """Return the agent-engine cache root (not created here)."""
    explicit = os.environ.get(ENV_CACHE)
    if explicit:
        return Path(explicit).expanduser()
    xdg = os.environ.get("XDG_CACHE_HOME")
    if xdg:
        return Path(xdg).expanduser() / "agent-engine"
    return Path.home() / ".cache" / "agent-engine"


def models_dir() -> Path:
    """Return the folder that holds built models, one sub-folder per model version."""
    return cache_root() / "models"
