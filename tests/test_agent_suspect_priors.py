"""What a suspect's text alone says of it (``agent_engine.agent.suspect_priors``): the marks of a broken function."""

from __future__ import annotations

import pytest

from agent_engine.agent.suspect_priors import looks_broken

pytestmark = pytest.mark.core


def test_dead_code_after_a_return_or_a_late_docstring_looks_broken() -> None:
    assert looks_broken("def f(x):\n    return x\n    y = 2\n")
    assert looks_broken("    def m(self):\n        for x in self.xs:\n            continue\n            print(x)\n")
    assert looks_broken('def f(x):\n    y = x\n    """Doc."""\n    return y\n')


def test_finished_functions_do_not() -> None:
    assert not looks_broken('def f(x):\n    """Doc."""\n    if x:\n        return 1\n    raise ValueError(x)\n')
    assert not looks_broken("def f(:\n")  # text that does not parse says nothing
    assert not looks_broken("    def m(self):\n        return self.x\n")
    assert not looks_broken("def nothing():\n    return\n    yield\n")  # a generator that yields nothing
    assert looks_broken('    def m(self):\n        return 1\n        s = """\ncolumn zero\n"""\n')
