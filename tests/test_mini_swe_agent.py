"""The real mini-swe-agent CLI, unmodified, in its text-based mode, against the server with no hint.

It sends only ``model``, ``messages`` and ``max_tokens``: the server must infer its turns as one job
(from the prefix chain) and pin them, so its later turns hit their pins. With the random-weight model
every answer is a format error, which mini-swe-agent answers by dropping the answer and asking again:
the weak join of the job inference is what keeps those turns one job.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import httpx
import pytest
from server_fixtures import build_engine, start_thread_server

from agent_engine.server.async_engine import AsyncEngine
from agent_engine.server.launcher import parse_prometheus

pytestmark = [pytest.mark.slow, pytest.mark.timeout(300)]

MINI = Path(sys.executable).with_name("mini")


@pytest.mark.skipif(not MINI.exists(), reason="mini-swe-agent is not installed (pip install -e '.[dev]')")
def test_unmodified_mini_swe_agent_turns_are_one_inferred_job_with_pin_hits(tmp_path):
    srv = start_thread_server(AsyncEngine(build_engine(policy="continuum", max_model_len=4096,
                                                       num_kv_blocks=512)))
    try:
        env = {**os.environ, "MSWEA_CONFIGURED": "true", "MSWEA_GLOBAL_CONFIG_DIR": str(tmp_path / "cfg"),
               "MSWEA_COST_TRACKING": "ignore_errors", "LITELLM_LOCAL_MODEL_COST_MAP": "True"}
        cmd = [str(MINI), "-c", "mini_textbased.yaml", "-c", "agent.step_limit=4", "-c", "agent.cost_limit=0",
               "-c", "agent.mode=yolo", "-c", f"model.model_kwargs.api_base={srv.base_url}/v1",
               "-c", "model.model_kwargs.api_key=unused", "-c", "model.model_kwargs.max_tokens=48",
               "-m", f"openai/{srv.engine.model_name}", "--model-class", "litellm_textbased",
               "-t", "Fix the failing test in this repository.", "-y", "--exit-immediately",
               "-o", str(tmp_path / "trajectory.json")]
        run = subprocess.run(cmd, cwd=tmp_path, env=env, capture_output=True, text=True, timeout=240)
        assert (tmp_path / "trajectory.json").exists(), run.stdout[-2000:] + run.stderr[-2000:]
        m = parse_prometheus(httpx.get(srv.base_url + "/metrics", timeout=30).text)
        turns = m["agent_engine_job_turns_by_hint_total"]
        assert turns >= 3, run.stdout[-2000:]
        assert m["agent_engine_job_inference_new_jobs_total"] == 1  # one job ...
        assert m["agent_engine_job_inference_joins_total"] == turns - 1  # ... every later turn joined it
        assert m["agent_engine_pins_hit_total"] >= 1 and m["agent_engine_pin_hits_by_hint_total"] >= 1
    finally:
        srv.stop()
