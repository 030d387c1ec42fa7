"""Sandbox tests that need subprocesses or seconds: every isolation mode, the agent's own environment,
an unprivileged agent, and the agent CLI's key reaching a real HTTP server without touching argv.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest
from sandbox_helpers import MODES, check_fork_bomb, check_timeouts, namespaces_error

from agent_engine.agent.cli import API_KEY_ENV
from agent_engine.cli.main import main as cli_main

pytestmark = [pytest.mark.slow, pytest.mark.timeout(120)]

ROOT = Path(__file__).resolve().parents[1]
SECRET_VAR, SECRET = "AGENT_SANDBOX_TEST_SECRET", "s3cr3t-3f9a1c"

# Run by a child agent process whose *initial* environment holds the secret (a variable set later with
# putenv never shows in /proc/<pid>/environ). It prints one JSON object: what a plain child shell read
# (the control: it must see the secret, or the check proves nothing) and what each sandbox read.
CHILD = r"""
import json, os, subprocess, sys
from agent_engine.agent.sandbox import Limits, Sandbox
READ = 'cat /proc/$PPID/environ; echo; grep -l -a -s AGENT_SANDBOX_TEST_SECRET= /proc/[0-9]*/environ; true'
out = {"control": subprocess.run(["bash", "-c", READ], capture_output=True, text=True).stdout}
for name, kw in json.loads(sys.argv[1]).items():
    with Sandbox.create(None, timeout=1.0, limits=Limits(max_processes=40), **kw) as sb:
        out[name] = {"read": sb.run(READ).output, "enforced": sb.enforced(),
                     "bomb": sb.run("for i in $(seq 200); do sleep 30 & done; wait").output}
print(json.dumps(out))
"""


@pytest.fixture(params=list(MODES))
def mode(request: pytest.FixtureRequest) -> dict[str, Any]:
    if request.param == "namespaces" and (why := namespaces_error()) is not None:
        pytest.skip(f"no namespaces on this machine: {why}")
    return MODES[request.param]


@pytest.fixture
def repo(tmp_path: Path) -> Path:
    r = tmp_path / "repo"
    r.mkdir()
    (r / "a.py").write_text("print('a')\n")
    return r


def test_timeouts_honoured_in_every_mode(repo: Path, mode: dict[str, Any]) -> None:
    check_timeouts(repo, mode)


def test_fork_bomb_is_limited_and_cleaned_in_every_mode(repo: Path, mode: dict[str, Any]) -> None:
    check_fork_bomb(repo, mode)


def _modes_here() -> dict[str, dict[str, Any]]:
    return {k: v for k, v in MODES.items() if k != "namespaces" or namespaces_error() is None}


def _run_child(prefix: list[str]) -> dict[str, Any]:
    env = {"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "PYTHONPATH": str(ROOT), "HOME": "/tmp",
           SECRET_VAR: SECRET}
    res = subprocess.run([*prefix, sys.executable, "-c", CHILD, json.dumps(_modes_here())], cwd="/tmp",
                         env=env, capture_output=True, text=True, timeout=90)
    assert res.returncode == 0, res.stderr[-2000:]
    return json.loads(res.stdout)


def _check_child(out: dict[str, Any]) -> None:
    assert SECRET in out.pop("control")  # a plain child reads its parent's environment
    assert set(out) == set(_modes_here())
    for name, got in out.items():
        found = [line for line in got["read"].splitlines() if line.startswith("/proc/") and line.endswith("/environ")]
        assert SECRET not in got["read"] and not found, name  # neither the parent's nor any other process's
        assert got["enforced"]["parent_environ_hidden"] and got["enforced"]["process_limit"], name
        assert "Resource temporarily unavailable" in got["bomb"], name


def test_agent_environment_unreadable_from_commands() -> None:
    _check_child(_run_child([]))


def test_unprivileged_agent() -> None:
    """The agent as an ordinary user: user namespaces without root, RLIMIT_NPROC, a non-dumpable agent."""
    if os.geteuid() != 0:
        pytest.skip("this process is already unprivileged: the other tests cover it")
    setpriv = shutil.which("setpriv")
    assert setpriv is not None
    out = _run_child([setpriv, "--reuid=65534", "--regid=65534", "--clear-groups", "--"])
    for got in out.values():
        if isinstance(got, dict):
            assert not got["enforced"]["separate_uid"] and not got["enforced"]["pids_cgroup"]
    _check_child(out)


class _Recorder(BaseHTTPRequestHandler):
    seen: list[str | None] = []

    def do_POST(self) -> None:  # noqa: N802 (http.server's naming)
        self.seen.append(self.headers.get("Authorization"))
        body = b'{"error": {"message": "stub", "type": "server_error"}}'
        self.send_response(500)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def do_DELETE(self) -> None:  # noqa: N802
        self.send_response(200)
        self.send_header("Content-Length", "0")
        self.end_headers()

    def log_message(self, *args: object) -> None:
        pass


@pytest.fixture
def stub_server() -> Iterator[tuple[str, list[str | None]]]:
    _Recorder.seen = []
    server = ThreadingHTTPServer(("127.0.0.1", 0), _Recorder)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}", _Recorder.seen
    finally:
        server.shutdown()
        thread.join(5)


def test_cli_key_from_file_or_environment(stub_server: tuple[str, list[str | None]], tmp_path: Path,
                                          monkeypatch: pytest.MonkeyPatch,
                                          capsys: pytest.CaptureFixture[str]) -> None:
    url, seen = stub_server
    (tmp_path / "key").write_text("file-key\n")
    base = ["agent", "--base-url", url, "--task", "t", "--step-limit", "1", "--no-stream", "--no-progress"]
    rc = cli_main([*base, "--api-key-file", str(tmp_path / "key"), "--out", str(tmp_path / "a.jsonl"),
                   "--allow-network"])
    summary = json.loads(capsys.readouterr().out)
    assert rc == 1 and seen == ["Bearer file-key"]  # the stub fails the call: the job ends with an error
    assert summary["sandbox"]["rlimits"] and summary["sandbox"]["network_isolated"] is False
    monkeypatch.setenv(API_KEY_ENV, "env-key")
    rc = cli_main([*base, "--out", str(tmp_path / "b.jsonl")])
    summary = json.loads(capsys.readouterr().out)
    assert rc == 1 and seen == ["Bearer file-key", "Bearer env-key"]
    assert summary["sandbox"]["network_isolated"] is (namespaces_error() is None)


def test_agent_client_imports_no_heavy_modules() -> None:
    probe = ("import sys, agent_engine.agent.cli, agent_engine.agent.job_runner; "
             "print(sorted(m for m in sys.modules"
             " if m.split('.')[0] in ('torch', 'transformers', 'fastapi')))")
    res = subprocess.run([sys.executable, "-c", probe], cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert res.returncode == 0, res.stderr
    assert res.stdout.strip() == "[]"
