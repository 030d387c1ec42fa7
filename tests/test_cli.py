"""The ``agent-engine`` CLI: starts light, every subcommand's ``--help`` works, README synopses parse."""

from __future__ import annotations

import re
import shlex
import subprocess
import sys
from pathlib import Path

import pytest

from agent_engine.cli import main as cli

pytestmark = pytest.mark.core

README = Path(__file__).resolve().parents[1] / "README.md"

# Every (sub)command path that has its own parser, so its --help is exercised.
NESTED = {
    "trace": [["synth"], ["fit"], ["import"]],
    "sim": [["run"], ["calibrate"]],
    "estimator": [["fit"]],
}


def _help_paths() -> list[list[str]]:
    from benchmarks.cli import BENCHMARKS

    paths = [[name] for name in cli.all_commands()]
    for group, subs in NESTED.items():
        paths += [[group, *s] for s in subs]
    paths += [["bench", name] for name in BENCHMARKS]
    return paths


def test_top_level_help_imports_no_torch() -> None:
    code = (
        "import sys\n"
        "from agent_engine.cli.main import main\n"
        "try:\n    main(['--help'])\nexcept SystemExit as e:\n    assert e.code == 0, e.code\n"
        "heavy = [m for m in ('torch', 'transformers', 'fastapi') if m in sys.modules]\n"
        "print('HEAVY', heavy)\n"
    )
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stderr
    assert "HEAVY []" in r.stdout, r.stdout
    for name in ("serve", "bench", "demo", "sim", "replay", "agent", "trace"):
        assert name in r.stdout


@pytest.mark.parametrize("path", _help_paths(), ids=lambda p: " ".join(p))
def test_every_subcommand_help_exits_zero(path: list[str], capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as e:
        cli.main([*path, "--help"])
    assert e.value.code == 0
    out = capsys.readouterr().out
    assert out.startswith("usage: agent-engine " + path[0]), out[:200]


def test_unknown_command_is_an_error(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as e:
        cli.main(["no-such-command"])
    assert e.value.code == 2
    assert "invalid choice" in capsys.readouterr().err


def test_a_plugin_that_fails_to_import_is_not_swallowed(monkeypatch: pytest.MonkeyPatch) -> None:
    class BrokenEntryPoint:
        name, value = "broken", "agent_engine.no_such_module"

    monkeypatch.setattr(cli, "entry_points", lambda group: [BrokenEntryPoint()])
    with pytest.raises(ModuleNotFoundError):
        cli.all_commands()


def readme_synopses() -> list[str]:
    """The ``agent-engine ...`` lines of the README's command-line code block."""
    text = README.read_text(encoding="utf-8")
    section = text.split("## Command line", 1)[1].split("\n## ", 1)[0]
    blocks = re.findall(r"```bash\n(.*?)```", section, flags=re.S)
    lines = [ln.split("#", 1)[0].strip() for b in blocks for ln in b.splitlines()]
    return [ln for ln in lines if ln.startswith("agent-engine ")]


def test_readme_has_synopses() -> None:
    names = {shlex.split(s)[1] for s in readme_synopses()}
    assert set(cli.all_commands()) <= names, set(cli.all_commands()) - names


@pytest.mark.parametrize("line", readme_synopses())
def test_readme_synopsis_parses(line: str) -> None:
    words = shlex.split(line)[1:]
    parser = cli.command_parser(cli.all_commands()[words[0]])
    args = parser.parse_args(words[1:])
    assert callable(args.func)
