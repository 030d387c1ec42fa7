"""A CPU server's token budget per step, measured on the loaded model on this CPU.

A step's cost on a CPU is mostly its matmuls, whose rate per token grows with the step's width until
the CPU's units are busy: a wider step then makes no more tokens a second, it only makes the requests
that share it (their prompts and every decode) wait longer. Where the rate stops growing depends on
the CPU (vector width, VNNI or matrix units, caches), the kernels' routes, the model and its weight
form, so it is measured, never assumed: :func:`measured_budget` times one step of each width of
``WIDTHS`` on the model the server just loaded, each step fresh prompts of ``WIDTHS[0]`` tokens (one
at 256, two at 512, four at 1,024: attention costs the same a token at every width, as it does for a
prompt however a budget splits it, so the widths differ only in how many rows each matmul
multiplies), and takes the narrowest whose cost per token is within ``TOLERANCE`` of the cheapest
(:func:`narrowest_near_best`). The narrowest width timed is ``WIDTHS[0]`` = 256: below it a
server's step costs outside the model's forward (scheduling, sampling, detokenizing and streaming
every running request's token) outweigh what a narrower step saves; on the Zen 5 EPYC the embedded
model's forward alone ran 3% cheaper a token at 128 than at 256, yet a server stepping 128 tokens
made 0.84x / 0.85x the tokens/s of one stepping 256 at 8 / 32 streams (``bench serve --budgets
128,256``, docs/performance.md). The result is stored per CPU, kernel build, torch,
thread count and model shape (``kernels.calibration_store``), so a server measures once per machine
and model; ``EngineConfig.for_serving`` asks for it only where the user set no budget, and a set
budget is never measured.

Invariants:
- Only widths that fit the KV pool and the model's context are timed; the answer is one of the timed
  widths, or ``WIDTHS[0]`` untimed where none fits (a budget past the pool only caps nothing).
- Measure before serving, while no block holds live or cached KV (it overwrites the first blocks).
- A stored result is used only under its own key, within physical bounds, for exactly the widths
  timed now and with the budget the rule gives its timings; anything else is measured again
  (``calibration_store``). One process at a time measures a key (``measuring_alone``).
"""

from __future__ import annotations

import logging
import time
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Protocol

import torch

from kernels.calibration_store import (
    checked_ms,
    checked_threshold,
    measuring_alone,
    store_key,
    stored_or_measured,
)

if TYPE_CHECKING:
    from agent_engine.model.loader import LoadedModel
    from agent_engine.model.runner import ModelRunner

logger = logging.getLogger(__name__)

WIDTHS = (256, 512, 1024)  # step widths timed, ascending (the module docstring: why none below 256)
TOLERANCE = 0.05  # a width whose cost per token is this close to the cheapest is wide enough
ROUNDS = 2  # every width is timed once per round, the rounds one after another: best of the rounds
CHEAP_ROUND_S = 1.0  # a round shorter than this gets one more (a stall weighs on short steps)
VERSION = 2  # bump when the measurement changes


class StepProfiler(Protocol):
    """The model runner as the measurement uses it: its KV geometry and the step probe."""

    num_kv_blocks: int
    block_size: int

    def profile_steps(self, widths: Sequence[int], seq_tokens: int, warm_up: bool = True) -> list[float]: ...


@dataclass(frozen=True)
class StepBudget:
    """One measurement: the budget chosen and the ms of one step per width behind it."""

    budget: int
    ms: dict[str, tuple[float]]  # width -> (ms of one step of that width,)
    key: str
    measured_at: str


def narrowest_near_best(widths: Sequence[int], seconds: Sequence[float], tolerance: float = TOLERANCE) -> int:
    """The narrowest of ``widths`` whose seconds per token are within ``tolerance`` of the cheapest's."""
    per_token = [s / w for w, s in zip(widths, seconds, strict=True)]
    cheapest = min(per_token)
    return next(w for w, c in zip(widths, per_token, strict=True) if c <= cheapest * (1 + tolerance))


def timed_widths(runner: StepProfiler, max_model_len: int) -> tuple[int, ...]:
    """The widths of ``WIDTHS`` whose prompts of ``WIDTHS[0]`` tokens fit this pool and context."""
    seq = WIDTHS[0]
    if seq > max_model_len:
        return ()
    per_seq = -(-seq // runner.block_size)
    return tuple(w for w in WIDTHS if w // seq * per_seq <= runner.num_kv_blocks - 1)


def measure(runner: StepProfiler, widths: Sequence[int], key: str) -> StepBudget:
    """Each width's step on ``runner`` now, best of ``ROUNDS`` rounds (one more where a round is shorter
    than ``CHEAP_ROUND_S``), and the budget they give. A round times every width once, so a stall of the
    machine lands on one width of one round, not on all of a width's timings. The first round's
    warm-up is a step of the widest width, so that whatever the kernels prepare on first use at some
    width (an attention route's calibration, a buffer) is done before any step is timed."""
    rounds = [runner.profile_steps(widths, WIDTHS[0])]
    for _ in range(ROUNDS - 1 + (sum(rounds[0]) < CHEAP_ROUND_S)):
        rounds.append(runner.profile_steps(widths, WIDTHS[0], warm_up=False))
    seconds = [min(times) for times in zip(*rounds, strict=True)]
    return StepBudget(narrowest_near_best(widths, seconds),
                      {str(w): (s * 1e3,) for w, s in zip(widths, seconds, strict=True)}, key,
                      time.strftime("%Y-%m-%dT%H:%M:%S"))


def _parse(data: dict[str, object], widths: Sequence[int]) -> StepBudget:
    """A stored measurement of ``widths``, if it is one: a timing for exactly those widths, within physical
    bounds, and the budget the rule gives them."""
    ms = checked_ms(data["ms"], (1,))
    if set(ms) != {str(w) for w in widths}:
        raise ValueError(f"timed widths {sorted(ms, key=int)} are not {list(widths)}")
    budget = checked_threshold(data["budget"], ms)
    if budget != narrowest_near_best(widths, [ms[str(w)][0] for w in widths]):
        raise ValueError(f"budget {budget} is not what the rule gives its timings")
    return StepBudget(budget, {w: (m[0],) for w, m in ms.items()}, str(data["key"]), str(data["measured_at"]))


def model_shape(loaded: LoadedModel, runner: ModelRunner) -> dict[str, object]:
    """What a step's cost depends on besides the CPU (the key's shape): the layer sizes, the activations'
    and the KV cache's dtypes, and the weights' form (a GGUF file's block types per matmul shape, over
    every layer)."""
    cfg = loaded.model.config
    sizes = {name: getattr(cfg, name, None) for name in (
        "model_type", "hidden_size", "intermediate_size", "num_hidden_layers", "num_attention_heads",
        "num_key_value_heads", "head_dim", "vocab_size", "tie_word_embeddings")}
    q = loaded.quantized
    weights = "float" if q is None else sorted({str(m.shape) for m in (q.head, *(m for layer in q.layers
                                                                               for m in layer.values()))})
    return {**sizes, "dtype": str(loaded.model.dtype), "kv_dtype": str(runner.kv_dtype), "weights": weights}


def measured_budget(runner: StepProfiler, model_shape: dict[str, object], max_model_len: int,
                    remeasure: bool = False) -> StepBudget:
    """This CPU's budget for the model of ``model_shape`` (what its step costs depend on: layer sizes,
    dtype, weight form): stored, unless ``remeasure``, else measured on ``runner`` and stored
    (``WIDTHS[0]``, nothing timed, where no width fits)."""
    widths = timed_widths(runner, max_model_len)
    if not widths:
        return StepBudget(WIDTHS[0], {}, "", "")
    key = store_key("step_budget", VERSION, {**model_shape, "widths": list(widths)}, torch.get_num_threads())

    def measure_now() -> StepBudget:
        logger.info("measuring the step's token budget on this CPU: one step of each of %s tokens", list(widths))
        return measure(runner, widths, key)

    with measuring_alone(key):  # servers starting side by side: one measures, the others read its result
        result = stored_or_measured(key, lambda data: _parse(data, widths), measure_now, remeasure)
    logger.info("step token budget %d (ms per step by width: %s)", result.budget,
                {w: round(m[0], 1) for w, m in result.ms.items()})
    return result


__all__ = ["TOLERANCE", "WIDTHS", "StepBudget", "measured_budget", "narrowest_near_best"]
