"""``GrammarLimits``: what compiling one new output constraint may cost a server (standard library only,
so the server's flags can show the defaults without importing the grammar library).

- ``timeout_s``: seconds a worker process may spend preparing and compiling it (then it is killed and
  the request refused);
- ``max_size``: grammar elements (``grammar_build.grammar_size``) it may have before compiling starts;
- ``workers``: worker processes (and grammar pool threads) compiling at once on the main lane; a tenant
  uses at most all but one of them. One more process and thread form the fast lane, which only tries
  constraints expected to be cheap (``server.grammar_compiles``), within ``fast_timeout_s``
  (``FAST_LANE_TIMEOUT_S``, at most ``timeout_s``): one that takes longer there is stopped and goes to
  the main lane with the whole budget, so a large constraint can hold the fast lane for that long only.

The defaults were measured on the embedded model's 4,096-token vocabulary on a 2-core machine: an
agent's tool set compiles in about 10 ms, 100 / 200 / 400 optional integer properties in 0.14 / 0.5 /
1.9 s, 1,000 in 12 s (past the budget); 1,000 optional properties are about 133,000 elements, 5,000 are
about 580,000 (past the cap), a 2,000-string enum 144,000. Compile time grows with the vocabulary, so a
150k-token model spends tens of times more on the same grammar: raise ``--grammar-compile-timeout``
there rather than shrinking what clients may send.
"""

from __future__ import annotations

from dataclasses import dataclass

DEFAULT_COMPILE_TIMEOUT_S = 10.0
DEFAULT_MAX_GRAMMAR_SIZE = 200_000
DEFAULT_GRAMMAR_WORKERS = 2
FAST_LANE_TIMEOUT_S = 1.0


@dataclass(frozen=True)
class GrammarLimits:
    """The budget, size cap and worker count for new output constraints (see the module docstring)."""

    timeout_s: float = DEFAULT_COMPILE_TIMEOUT_S
    max_size: int = DEFAULT_MAX_GRAMMAR_SIZE
    workers: int = DEFAULT_GRAMMAR_WORKERS

    def __post_init__(self) -> None:
        if not self.timeout_s > 0:
            raise ValueError("the grammar compile timeout must be > 0 seconds")
        if self.max_size < 1 or self.workers < 1:
            raise ValueError("the grammar size cap and the grammar workers must be at least 1")

    @property
    def fast_timeout_s(self) -> float:
        """The budget of a trial compile on the fast lane."""
        return min(self.timeout_s, FAST_LANE_TIMEOUT_S)
