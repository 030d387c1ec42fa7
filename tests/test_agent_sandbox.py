"""Sandbox tests (fast, no model): timeout, truncation, isolation of the repo copy, scrubbed environment."""

from __future__ import annotations

import subprocess
import sys
import time
from pathlib import Path

import pytest

from agent_engine.agent.loop import SUBMIT_MARKER, is_submission, parse_actions, tool_name_of
from agent_engine.agent.sandbox import TIMEOUT_EXIT_CODE, Sandbox, truncate_output


@pytest.fixture
def repo(tmp_path: Path) -> Path:
    r = tmp_path / "repo"
    (r / "pkg").mkdir(parents=True)
    (r / "a.py").write_text("print('a')\n")
    (r / "pkg" / "b.py").write_text("x = 1\n")
    return r


@pytest.mark.core
def test_timeout_kills_sleep(repo: Path) -> None:
    with Sandbox.create(repo, timeout=0.5) as sb:
        t = time.perf_counter()
        res = sb.run("echo start; sleep 30; echo never")
        assert time.perf_counter() - t < 5
    assert res.timed_out and res.exit_code == TIMEOUT_EXIT_CODE
    assert "start" in res.output and "never" not in res.output and "timed out" in res.output


@pytest.mark.core
def test_timeout_kills_background_children(repo: Path) -> None:
    with Sandbox.create(repo, timeout=0.5) as sb:
        t = time.perf_counter()
        res = sb.run("sleep 30 & sleep 30 & wait")
        assert time.perf_counter() - t < 5
    assert res.timed_out


@pytest.mark.core
def test_output_truncated(repo: Path) -> None:
    with Sandbox.create(repo, max_output_chars=200) as sb:
        res = sb.run("seq 1 10000")
    assert res.truncated and len(res.output) <= 200
    assert res.output.startswith("1\n2\n") and res.output.endswith("10000\n") and "elided" in res.output
    for n in (1, 5, 50, 51, 299):
        text, cut = truncate_output("x" * 300, n)
        assert len(text) <= n and cut
    assert truncate_output("short", 10) == ("short", False)


@pytest.mark.core
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


@pytest.mark.core
def test_environment_scrubbed(repo: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("AGENT_TEST_SECRET_TOKEN", "s3cr3t-value")
    with Sandbox.create(repo) as sb:
        res = sb.run("env")
        home = sb.run("echo $HOME").output.strip()
        assert home == str(sb.home)
    assert "s3cr3t-value" not in res.output and "AGENT_TEST_SECRET_TOKEN" not in res.output
    names = {line.split("=", 1)[0] for line in res.output.splitlines() if "=" in line}
    assert {"PATH", "HOME", "LANG"} <= names
    assert names <= {"PATH", "HOME", "LANG", "LC_ALL", "PWD", "SHLVL", "_", "OLDPWD"}


@pytest.mark.core
def test_exit_code_and_stderr(repo: Path) -> None:
    with Sandbox.create(repo) as sb:
        res = sb.run("echo out; echo err >&2; exit 3")
        missing = sb.run("definitely-not-a-program-xyz")
    assert res.exit_code == 3 and "out" in res.output and "err" in res.output and res.seconds >= 0
    assert missing.exit_code == 127


@pytest.mark.core
def test_empty_sandbox_and_bad_repo(tmp_path: Path) -> None:
    with Sandbox.create(None) as sb:
        assert sb.run("ls -A").output == ""
    with pytest.raises(ValueError):
        Sandbox.create(tmp_path / "missing")


@pytest.mark.core
def test_action_parsing_and_submission() -> None:
    assert parse_actions("think\n```bash\nls -la\n```\n") == ["ls -la"]
    assert len(parse_actions("```bash\nls\n```\n```bash\npwd\n```")) == 2
    assert parse_actions("no block here") == []
    assert tool_name_of("cd src && pytest -x") == "bash:pytest"
    assert is_submission("git diff", f"{SUBMIT_MARKER}\ndiff --git a b\n")
    assert is_submission(f"echo {SUBMIT_MARKER}", "")
    assert not is_submission("cat x", f"line\n{SUBMIT_MARKER}\n")


@pytest.mark.slow
def test_agent_client_imports_no_heavy_modules() -> None:
    probe = ("import sys, agent_engine.agent.cli, agent_engine.agent.runner; "
             "print(sorted(m for m in sys.modules"
             " if m.split('.')[0] in ('torch', 'transformers', 'fastapi')))")
    res = subprocess.run([sys.executable, "-c", probe], cwd=Path(__file__).resolve().parents[1],
                         capture_output=True, text=True, timeout=120)
    assert res.returncode == 0, res.stderr
    assert res.stdout.strip() == "[]"
