"""Tool-call parsing of a finished turn's text (names as in the shared trace's ``tool_name``)."""

from __future__ import annotations

import json

import pytest

from estimator import Estimator, normalize_tool_name, parse_tool, parse_tool_call

pytestmark = pytest.mark.core


def fence(body: str, lang: str = "bash") -> str:
    return f"THOUGHT: let me look.\n\n```{lang}\n{body}\n```\n"


CASES = [
    # the tools named in the shared trace
    (fence("find /testbed -name '*.py' | head -20"), "bash:find"),
    ("I will list it.\n```mswea_bash_command\nls -la src\n```", "bash:ls"),  # mini-swe-agent text mode
    (fence("grep -rn \"def foo\" /testbed/src"), "bash:grep"),
    (fence("cat /testbed/setup.py"), "bash:cat"),
    (fence("sed -n '100,140p' /testbed/django/db/models/query.py"), "bash:sed"),
    (fence("python reproduce.py"), "bash:python"),
    (fence("pytest tests/test_x.py -q"), "bash:pytest"),
    (fence("pip install -e ."), "bash:pip"),
    (fence("ls -la /testbed"), "bash:ls"),
    (fence("git diff"), "bash:git"),
    (fence("cp a.py b.py"), "bash:cp"),
    (fence("echo MINI_SWE_AGENT_FINAL_OUTPUT"), "bash:echo"),
    (fence("head -50 file.py"), "bash:head"),
    (fence("awk 'NR>=10 && NR<=20' f.py"), "bash:awk"),
    (fence("for f in *.py; do grep -l x \"$f\"; done"), "bash:for"),
    # prefixes stripped
    (fence("cd /testbed && python -m pytest tests/ -x"), "bash:pytest"),
    (fence("cd /testbed; python3 -m pip install numpy"), "bash:pip"),
    (fence("env PYTHONPATH=. DJANGO_SETTINGS=x python3 manage.py test"), "bash:python"),
    (fence("PYTHONPATH=/testbed timeout 60 pytest -q"), "bash:pytest"),
    (fence("sudo -E /usr/bin/grep -n foo bar.txt"), "bash:grep"),
    (fence("timeout 30s python3.11 script.py"), "bash:python"),
    (fence("pip3 install requests"), "bash:pip"),
    (fence("export DJANGO_SETTINGS_MODULE=test && cd /testbed && ./runtests.py"), "bash:runtests.py"),
    # pipes, chains, heredocs, multi-line blocks, continuations, comments
    (fence("cat file.py | grep -n foo | head"), "bash:cat"),
    (fence("grep -n x a.py && sed -i 's/a/b/' a.py && python a.py"), "bash:grep"),
    (fence("cat <<'EOF' > /testbed/reproduce.py\nimport django\nprint('x')\nEOF"), "bash:cat"),
    (fence("python - <<EOF\nprint(1)\nEOF"), "bash:python"),
    (fence("# look at the file first\n\ncd /testbed\nnl -ba src/x.py | sed -n '1,20p'"), "bash:nl"),
    (fence("python -c \\\n  'import sys; print(sys.version)'"), "bash:python"),
    (fence("(cd /testbed && git status)"), "bash:git"),
    (fence("ls", lang="sh"), "bash:ls"),
    (fence("wc -l f.py", lang="shell"), "bash:wc"),
    (fence("echo 'unbalanced"), "bash:echo"),
    (fence("cd /testbed"), "bash:cd"),  # a bare `cd` is still the command issued
    ("First I explore.\n```bash\nfind . -name x\n```\nthen\n```bash\npytest\n```", "bash:find"),
    # no tool at all
    ("I have finished the task.", None),
    ("", None),
    (None, None),
    ("Here is some python:\n```python\nprint('hi')\n```", None),
    (fence("# only a comment"), None),
    ("Calling it (maybe) later.", None),
    # Python-call syntax (BFCL-style)
    ('[get_weather(city="Paris")]', "get_weather"),
    ('[get_weather(city="Paris"), get_time(tz="CET")]', "get_weather"),
    ("math.factorial(n=5)", "math.factorial"),
    # inline tagged JSON (Hermes-style)
    ('<tool_call>{"name": "search", "arguments": {"q": "x"}}</tool_call>', "search"),
]


@pytest.mark.parametrize(("text", "expected"), CASES)
def test_parse_text(text: str | None, expected: str | None) -> None:
    assert parse_tool(text) == expected


def test_at_least_twenty_cases() -> None:
    assert len(CASES) >= 20


OPENAI_CALLS = [{"id": "c1", "type": "function", "function": {"name": "read_file", "arguments": "{\"p\": 1}"}},
                {"id": "c2", "type": "function", "function": {"name": "write_file", "arguments": "{}"}}]


def test_openai_tool_calls_list_and_json() -> None:
    assert parse_tool(None, OPENAI_CALLS) == "read_file"
    assert parse_tool("ignored ```bash\nls\n```", json.dumps(OPENAI_CALLS)) == "read_file"
    assert parse_tool(None, {"tool_calls": OPENAI_CALLS}) == "read_file"
    assert parse_tool(None, [{"name": "flat_style"}]) == "flat_style"


def test_openai_shell_function_reads_the_command() -> None:
    calls = [{"type": "function", "function": {"name": "bash", "arguments": json.dumps({"command": "cd x && pytest"})}}]
    assert parse_tool(None, calls) == "bash:pytest"


def test_bad_tool_calls_fall_back_to_text() -> None:
    assert parse_tool(fence("ls"), "not json") == "bash:ls"
    assert parse_tool(fence("ls"), [{"function": {"arguments": "{}"}}]) == "bash:ls"
    assert parse_tool(None, 42) is None


def test_command_words_kept_for_features() -> None:
    call = parse_tool_call(fence("cd /testbed && timeout 60 python -m pytest tests/test_a.py -x"))
    assert call is not None and call.name == "bash:pytest"
    assert call.command == "pytest tests/test_a.py -x"


def test_normalize_is_idempotent() -> None:
    for name in ["bash:python3.11", "bash:pip3", "bash:grep", "get_weather", "bash:#"]:
        once = normalize_tool_name(name)
        assert normalize_tool_name(once) == once
    assert normalize_tool_name("bash:python3") == "bash:python"


def test_facade_parse_tool() -> None:
    assert Estimator.parse_tool(fence("git log -3")) == "bash:git"
