"""Sandbox tests (fast, no model): limits, timeouts, bounded output, cleanup, confinement, the agent CLI's key.

Every behaviour that differs by isolation runs in each mode this machine offers: ``namespaces``
(skipped, with the probe's reason, where user namespaces are unavailable), ``process`` (with a pids
cgroup where one can be made) and ``process`` without a cgroup (rlimits, session kill and the /proc
scan only). Where a protection is not available the test asserts what ``enforced()`` says instead.
"""

from __future__ import annotations

import os
import socket
import time
import tracemalloc
from pathlib import Path
from typing import Any

import pytest
from sandbox_helpers import MODES, check_fork_bomb, check_timeouts, live_pids, namespaces_error, token

from agent_engine.agent.cli import API_KEY_ENV, read_api_key
from agent_engine.agent.sandbox import TIMEOUT_EXIT_CODE, Limits, Sandbox, truncate_output
from agent_engine.agent.sandbox.output import OutputCapture
from agent_engine.agent.text_interface import SUBMIT_MARKER, is_submission, parse_actions, tool_name_of
from agent_engine.cli.main import main as cli_main

pytestmark = [pytest.mark.core, pytest.mark.timeout(60)]


@pytest.fixture(params=list(MODES))
def mode(request: pytest.FixtureRequest) -> dict[str, Any]:
    if request.param == "namespaces" and (why := namespaces_error()) is not None:
        pytest.skip(f"no namespaces on this machine: {why}")
    return MODES[request.param]


@pytest.fixture
def repo(tmp_path: Path) -> Path:
    r = tmp_path / "repo"
    (r / "pkg").mkdir(parents=True)
    (r / "a.py").write_text("print('a')\n")
    (r / "pkg" / "b.py").write_text("x = 1\n")
    return r


def test_timeouts_honoured(repo: Path) -> None:
    """In the default isolation; tests/test_agent_sandbox_slow.py runs it in every mode."""
    check_timeouts(repo, {})


def test_timeout_kills_sleep(repo: Path) -> None:
    with Sandbox.create(repo, timeout=0.5) as sb:
        t = time.perf_counter()
        res = sb.run("echo start; sleep 30; echo never")
        assert time.perf_counter() - t < 5.0  # cut long before the 30 s sleep (bounds loose: CI is loaded)
    assert res.timed_out and res.exit_code == TIMEOUT_EXIT_CODE
    assert "start" in res.output and "never" not in res.output and "timed out" in res.output


def test_yes_costs_bounded_memory_and_output(repo: Path) -> None:
    tracemalloc.start()
    try:
        with Sandbox.create(repo, timeout=1.0, max_output_chars=1000) as sb:
            t = time.perf_counter()
            res = sb.run("yes")
            elapsed = time.perf_counter() - t
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert res.timed_out and elapsed < 5.0
    assert res.output_bytes > 20 << 20  # it really streamed (tens of MiB at least)
    assert peak < 4 << 20, f"peak {peak} bytes traced while reading {res.output_bytes} bytes"
    assert res.truncated and len(res.output) <= 1000
    assert res.output.startswith("y\ny\n") and res.output.rstrip().endswith("and was killed]")


def test_output_truncated(repo: Path) -> None:
    with Sandbox.create(repo, max_output_chars=200) as sb:
        res = sb.run("seq 1 10000")
    assert res.truncated and len(res.output) <= 200
    assert res.output.startswith("1\n2\n") and res.output.endswith("10000\n") and "elided" in res.output
    for n in (1, 5, 50, 51, 299):
        text, cut = truncate_output("x" * 300, n)
        assert len(text) <= n and cut
    assert truncate_output("short", 10) == ("short", False)


def test_capture_keeps_head_and_tail_and_counts_the_middle() -> None:
    cap = OutputCapture.for_chars(100)
    cap.feed(b"HEAD")
    for _ in range(1000):
        cap.feed("é".encode() * 500)  # two bytes a character, chunks cut anywhere below
    cap.feed("ü".encode() * 300 + b"xTAIL")  # the kept tail starts inside a "ü"
    text, truncated = cap.text(100)
    assert truncated and len(text) <= 100 and text.startswith("HEAD") and text.endswith("TAIL")
    elided = int(text.split("[")[1].split(" characters")[0])
    kept = len(text) - len(text[text.index("\n..."):text.index("...\n") + 4])
    assert elided + kept == 4 + 500_000 + 300 + 5  # every character accounted for
    assert cap.total_bytes == 4 + 1_000_000 + 600 + 5
    small = OutputCapture.for_chars(100)
    small.feed("ok ✓\n".encode())
    assert small.text(100) == ("ok ✓\n", False)


# --------------------------------------------------------------------------- limits and cleanup


def test_fork_bomb_is_limited_and_cleaned(repo: Path) -> None:
    """In the default isolation; tests/test_agent_sandbox_slow.py runs it in every mode."""
    check_fork_bomb(repo, {})


def test_background_processes_end_with_the_command_and_close(repo: Path, mode: dict[str, Any]) -> None:
    tok = token()
    with Sandbox.create(repo, timeout=5, **mode) as sb:
        t = time.perf_counter()
        res = sb.run(f"sleep {tok} & setsid sleep {tok} > /dev/null 2>&1 & nohup sleep {tok} >/dev/null & echo ok")
        assert res.output == "ok\n" and time.perf_counter() - t < 10.0  # no waiting for the children
        assert live_pids(tok) == []
    assert not sb.root.exists() and live_pids(tok) == []
    assert not list(Path("/sys/fs/cgroup").glob(f"*/agent-sandbox-{sb.sandbox_id}*"))  # cgroups removed


def test_cgroup_catches_what_left_session_and_environment(repo: Path) -> None:
    tok = token()
    with Sandbox.create(repo, timeout=5, isolation="process") as sb:
        if sb.cgroups is None:
            pytest.skip("no writable pids cgroup here (needs root): covered by the namespaces mode")
        sb.run(f"(env -i setsid sleep {tok} >/dev/null 2>&1 &); echo ok")
        assert live_pids(tok) == []


def test_rlimits_are_applied(repo: Path, mode: dict[str, Any]) -> None:
    limits = Limits(file_size_bytes=1 << 20, open_files=64, address_space_bytes=2 << 30, cpu_seconds=7)
    with Sandbox.create(repo, limits=limits, **mode) as sb:
        table = sb.run("cat /proc/self/limits").output
        big = sb.run("head -c 3000000 /dev/zero > big; echo rc=$?")
        size = (sb.workdir / "big").stat().st_size
    rows = {line[:26].strip(): line[26:].split() for line in table.splitlines()[1:]}
    assert rows["Max cpu time"][:2] == ["7", "7"]
    assert rows["Max file size"][:2] == [str(1 << 20)] * 2
    assert rows["Max open files"][:2] == ["64", "64"]
    assert rows["Max address space"][:2] == [str(2 << 30)] * 2
    assert "rc=153" in big.output and size == 1 << 20  # SIGXFSZ (128 + 25) at the limit


# --------------------------------------------------------------------------- confinement


def test_enforced_says_what_holds(repo: Path, mode: dict[str, Any]) -> None:
    with Sandbox.create(repo, **mode) as sb:
        got = sb.enforced()
    ns = mode["isolation"] == "namespaces"
    for key in ("pid_namespace", "read_only_system", "private_tmp", "network_isolated"):
        assert got[key] is ns, key
    assert got["rlimits"] and got["kill_tree_on_exit_and_timeout"] and got["scrubbed_environment"]
    assert got["pids_cgroup"] is (sb.cgroups is not None)
    if not mode.get("cgroup", True):
        assert not got["pids_cgroup"]
    assert got["separate_uid"] is (os.geteuid() == 0)
    assert got["parent_environ_hidden"] and got["process_limit"]


def test_writes_outside_the_sandbox(repo: Path, mode: dict[str, Any]) -> None:
    outside = Path(os.path.realpath(os.environ.get("TMPDIR", "/tmp"))) / f"agent-outside-{token()}"
    outside.mkdir(mode=0o777)
    outside.chmod(0o777)  # world-writable: only the sandbox can keep a command out
    try:
        with Sandbox.create(repo, **mode) as sb:
            res = sb.run(f"touch {outside}/x /etc/agent-sandbox-x; touch x $HOME/h $TMPDIR/t /tmp/t && echo inside-ok")
            enforced = sb.enforced()
        assert "inside-ok" in res.output  # the work folder, HOME, TMPDIR and /tmp stay writable
        if enforced["read_only_system"]:
            assert not (outside / "x").exists() and "Read-only file system" in res.output
        else:  # only file permissions stand between the command and the machine
            assert (outside / "x").exists()
        if enforced["read_only_system"] or enforced["separate_uid"]:
            assert not Path("/etc/agent-sandbox-x").exists()
    finally:
        for p in [*outside.iterdir(), Path("/etc/agent-sandbox-x")]:
            p.unlink(missing_ok=True)
        outside.rmdir()


def test_network_namespace_blocks_the_host_loopback(repo: Path, mode: dict[str, Any]) -> None:
    with socket.create_server(("127.0.0.1", 0)) as server:
        port = server.getsockname()[1]
        probe = f"exec 3<>/dev/tcp/127.0.0.1/{port} && echo connected"
        with Sandbox.create(repo, **mode) as sb:
            isolated = sb.enforced()["network_isolated"]
            blocked = sb.run(probe)
        with Sandbox.create(repo, allow_network=True, **mode) as sb:
            assert not sb.enforced()["network_isolated"]
            allowed = sb.run(probe)
    assert allowed.output.strip() == "connected"
    if isolated:
        assert "connected" not in blocked.output and blocked.exit_code != 0
    else:
        assert blocked.output.strip() == "connected"  # said plainly by enforced()


def test_bad_arguments(repo: Path, tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="isolation"):
        Sandbox.create(repo, isolation="chroot")
    with pytest.raises(ValueError):
        Limits(max_processes=0)
    with pytest.raises(ValueError):
        Sandbox.create(tmp_path / "missing")
    sb = Sandbox.create(None)
    sb.close()
    sb.close()
    with pytest.raises(ValueError, match="closed"):
        sb.run("true")


# --------------------------------------------------------------------------- the copy and the environment


def test_cwd_is_a_temp_copy_and_repo_untouched(repo: Path) -> None:
    before = sorted(p.relative_to(repo) for p in repo.rglob("*"))
    with Sandbox.create(repo) as sb:
        assert sb.run("pwd").output.strip() == str(sb.workdir)
        assert sb.workdir != repo
        assert sb.run("ls").output.split() == ["a.py", "pkg"]
        res = sb.run("rm -rf pkg a.py && echo new > c.txt && cd / && ls > /dev/null")
        assert res.exit_code == 0
        assert sb.run("ls").output.split() == ["c.txt"]  # each command starts in the copy again
        root = sb.root
    assert not root.exists()  # closed: the copy is gone
    assert sorted(p.relative_to(repo) for p in repo.rglob("*")) == before
    assert (repo / "a.py").read_text() == "print('a')\n"


def test_environment_scrubbed(repo: Path, monkeypatch: pytest.MonkeyPatch, mode: dict[str, Any]) -> None:
    monkeypatch.setenv("AGENT_TEST_SECRET_TOKEN", "s3cr3t-value")
    with Sandbox.create(repo, **mode) as sb:
        res = sb.run("env")
        assert sb.run("echo $HOME $TMPDIR").output.split() == [str(sb.home), str(sb.root / "tmp")]
    assert "s3cr3t-value" not in res.output and "AGENT_TEST_SECRET_TOKEN" not in res.output
    names = {line.split("=", 1)[0] for line in res.output.splitlines() if "=" in line}
    assert {"PATH", "HOME", "LANG", "TMPDIR", "AGENT_SANDBOX_ID"} <= names
    assert names <= {"PATH", "HOME", "LANG", "LC_ALL", "PYTHONDONTWRITEBYTECODE", "TMPDIR", "AGENT_SANDBOX_ID", "PWD", "SHLVL", "_"}


def test_exit_code_and_stderr(repo: Path) -> None:
    with Sandbox.create(repo) as sb:
        res = sb.run("echo out; echo err >&2; exit 3")
        missing = sb.run("definitely-not-a-program-xyz")
    with Sandbox.create(repo, isolation="process") as sb:  # (PID 1 of a namespace ignores its own TERM)
        killed = sb.run("kill -TERM $$")
    assert res.exit_code == 3 and "out" in res.output and "err" in res.output and res.seconds >= 0
    assert missing.exit_code == 127 and killed.exit_code == 128 + 15


def test_empty_sandbox(tmp_path: Path) -> None:
    with Sandbox.create(None) as sb:
        assert sb.run("ls -A").output == ""


def test_action_parsing_and_submission() -> None:
    assert parse_actions("think\n```bash\nls -la\n```\n") == ["ls -la"]
    assert len(parse_actions("```bash\nls\n```\n```bash\npwd\n```")) == 2
    assert parse_actions("no block here") == []
    assert tool_name_of("cd src && pytest -x") == "bash:pytest"
    assert is_submission("git diff", f"{SUBMIT_MARKER}\ndiff --git a b\n")
    assert is_submission(f"echo {SUBMIT_MARKER}", "")
    assert not is_submission("cat x", f"line\n{SUBMIT_MARKER}\n")


# --------------------------------------------------------------------------- the agent CLI's API key


def test_api_key_never_on_the_command_line(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    rc = cli_main(["agent", "--base-url", "http://127.0.0.1:9", "--task", "t", "--out", str(tmp_path / "o"),
                   "--api-key", "sekret"])
    assert rc == 2 and API_KEY_ENV in capsys.readouterr().err and not (tmp_path / "o").exists()


def test_read_api_key(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(API_KEY_ENV, raising=False)
    assert read_api_key(None) is None
    monkeypatch.setenv(API_KEY_ENV, "from-env")
    assert read_api_key(None) == "from-env"
    (tmp_path / "key").write_text("from-file \nignored\n")
    assert read_api_key(str(tmp_path / "key")) == "from-file"
    (tmp_path / "empty").write_text("\n")
    with pytest.raises(ValueError, match="no key"):
        read_api_key(str(tmp_path / "empty"))
