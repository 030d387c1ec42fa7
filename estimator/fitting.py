"""Fit and evaluate the learned duration model on in-memory trace jobs (no file format here).

A job is a pair ``(job_id, turns)``: its turns in order, each a ``ToolTurn``; the trace reader of
``agent_engine`` yields turns that satisfy the protocol as they are.

Invariants:
- A turn's ``turn_index`` is its position in its job, counting from 0.
- Tool names pass through ``normalize_tool_name`` (an empty name is no tool), so they match what
  ``parse_tool`` returns online.
- Only turns with a measured ``tool_seconds`` become rows; durations are clamped at 0.
- A turn's job-history features come from earlier turns of the same job id only, as online.
- The held-out split depends on the job id alone (``is_holdout``), so it is the same on every run.
"""

from __future__ import annotations

import zlib
from collections.abc import Iterable, Sequence
from typing import Protocol

import numpy as np

from estimator.tool_parser import normalize_tool_name
from estimator.ttl_learned import DEFAULT_QUANTILES, N_FEATURES, QuantileDurationModel, request_features
from estimator.ttl_paper import TTLRequest

__all__ = ["ToolTurn", "fit_learned_model", "holdout_mae", "is_holdout", "trace_dataset"]

HISTORY_TURNS = 64  # earlier durations of a job that feed its history features


class ToolTurn(Protocol):
    """What a trace turn must provide (read-only attributes; extra attributes are ignored)."""

    @property
    def tool_name(self) -> str | None: ...

    @property
    def tool_seconds(self) -> float | None: ...

    @property
    def prompt_tokens(self) -> int: ...


Jobs = Iterable[tuple[str, Sequence[ToolTurn]]]
Dataset = tuple[list[str | None], np.ndarray, np.ndarray, list[str]]


def trace_dataset(jobs: Jobs) -> Dataset:
    """(tools, features ``(n, N_FEATURES)``, durations ``(n,)``, job ids) of every measured turn, in order."""
    tools: list[str | None] = []
    rows: list[list[float]] = []
    ys: list[float] = []
    job_ids: list[str] = []
    history: dict[str, list[float]] = {}
    for job_id, turns in jobs:
        job_id = str(job_id)
        past = history.setdefault(job_id, [])
        for index, turn in enumerate(turns):
            if turn.tool_seconds is None:
                continue
            tool, feats = request_features(_request(turn, index, past))
            seconds = max(0.0, float(turn.tool_seconds))
            tools.append(tool)
            rows.append(feats)
            ys.append(seconds)
            job_ids.append(job_id)
            past.append(seconds)
    return tools, np.asarray(rows, float).reshape(-1, N_FEATURES), np.asarray(ys, float), job_ids


def _request(turn: ToolTurn, index: int, past: list[float]) -> TTLRequest:
    """The request the turn would have made online, given the job's earlier durations ``past``."""
    name = normalize_tool_name(turn.tool_name) if turn.tool_name else None
    return TTLRequest(name, int(turn.prompt_tokens or 0), index, job_durations=tuple(past[-HISTORY_TURNS:]))


def fit_learned_model(
    jobs: Jobs, quantiles: Sequence[float] = DEFAULT_QUANTILES, max_iter: int = 80, seed: int = 0
) -> QuantileDurationModel:
    """A model fitted on every measured turn of ``jobs`` (raises ValueError below 10 such turns)."""
    tools, x, y, _ = trace_dataset(jobs)
    return QuantileDurationModel(quantiles, max_iter, seed=seed).fit(tools, x, y)


def is_holdout(job_id: str, fraction: float) -> bool:
    """Whether the job is held out: a deterministic split by a hash of its id (about ``fraction``)."""
    return (zlib.crc32(job_id.encode()) % 1000) < fraction * 1000


def holdout_mae(jobs: Jobs, fraction: float = 0.3, model: QuantileDurationModel | None = None) -> dict[str, float]:
    """Fit ``model`` (default: a new one) on the jobs not held out; on the held-out turns, the MAE in
    seconds of its median (``learned_mae``) and of the training per-tool mean (``tool_mean_mae``; the
    overall training mean for tools not seen in training), plus ``train_turns`` and ``test_turns``."""
    tools, x, y, job_ids = trace_dataset(jobs)
    test = np.array([is_holdout(j, fraction) for j in job_ids])
    train_tools = [t for t, h in zip(tools, test, strict=True) if not h]
    test_tools = [t for t, h in zip(tools, test, strict=True) if h]
    model = (model or QuantileDurationModel()).fit(train_tools, x[~test], y[~test])
    pred = model.predict_median(test_tools, x[test])
    y_train, y_test = y[~test], y[test]
    baseline = _per_tool_mean(train_tools, y_train, test_tools)
    return {
        "train_turns": float(len(y_train)),
        "test_turns": float(len(y_test)),
        "learned_mae": float(np.abs(pred - y_test).mean()),
        "tool_mean_mae": float(np.abs(baseline - y_test).mean()),
    }


def _per_tool_mean(train_tools: list[str | None], y_train: np.ndarray, tools: list[str | None]) -> np.ndarray:
    """For each of ``tools``, its mean training duration (the overall mean if it was never trained on)."""
    overall = float(y_train.mean())
    means = {t: float(y_train[[u == t for u in train_tools]].mean()) for t in set(train_tools)}
    return np.array([means.get(t, overall) for t in tools])
