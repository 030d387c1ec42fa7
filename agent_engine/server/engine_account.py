"""The engine's last act when its loop ends: release every pin (each counted) and log the final account.

The account line (INFO, ``FINAL_STATS_PREFIX`` then JSON) says what was still running, waiting or held
and every pin counter, so an operator (and the fault benchmark) can check that nothing was lost: no
block in use, every pin created ended exactly once.
"""

from __future__ import annotations

import contextlib
import json
import logging

from agent_engine.server.engine_like import EngineLike

logger = logging.getLogger("agent_engine.server.async_engine")

FINAL_STATS_PREFIX = "final engine stats:"
FINAL_STATS_KEYS = ("num_running", "num_waiting", "blocks_in_use", "num_pinned_jobs", "pins", "num_failed_steps")


def release_and_account(engine: EngineLike) -> None:
    """Release every pin the engine holds, then log the final account; never raises."""
    with contextlib.suppress(Exception):
        logger.info("released %d pins at shutdown", engine.release_all_jobs())
        stats = engine.stats()
        final = {k: stats.get(k) for k in FINAL_STATS_KEYS}
        logger.info("%s %s", FINAL_STATS_PREFIX, json.dumps(final, default=str))
