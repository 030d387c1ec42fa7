"""The learned TTL: quantile gradient boosting predicts a call's duration distribution.

Features of a call: tool id, hashed first command words, log prompt length, turn index, and the
job's own history (its last measured tool duration and its mean log duration so far). One
``HistGradientBoostingRegressor(loss="quantile")`` per level, trained on log durations (quantiles are
invariant under monotone maps). Fitted offline from trace jobs (``estimator.fitting``), refitted
online from recorded samples.

Invariants:
- Predicted quantiles are >= 0 and non-decreasing in the level (crossings are sorted away).
- ``LearnedTTLPolicy`` uses the tool's own CDF once it has ``cold_start_samples`` samples, the
  model's distribution while the tool's history is thinner (including the global cold start), and
  the paper policy's fallbacks when no model is loaded. The argmax and the hint cap are the paper's.
- A saved model loads back to identical predictions.
"""

from __future__ import annotations

import math
import os
import pickle
import threading
import zlib
from collections import deque
from collections.abc import Sequence
from typing import TYPE_CHECKING

import numpy as np

if TYPE_CHECKING:  # scikit-learn loads only when a model is fitted (it takes a second to import)
    from sklearn.ensemble import HistGradientBoostingRegressor
from threadpoolctl import threadpool_limits

from estimator.durations import DurationHistory, EmpiricalCDF, EtaTracker, SlidingMean
from estimator.reload_cost import ReloadCostModel
from estimator.ttl_paper import PaperTTLPolicy, TTLRequest

__all__ = ["DEFAULT_QUANTILES", "N_FEATURES", "LearnedTTLPolicy", "QuantileDurationModel", "request_features"]

DEFAULT_QUANTILES: tuple[float, ...] = (0.05, 0.1, 0.25, 0.5, 0.75, 0.9, 0.95)
CMD_BUCKETS = 64
N_FEATURES = 5  # numeric features per call, see ``request_features``
_EPS = 1e-3  # seconds added before the log
_FORMAT = "agent-engine-quantile-durations/1"


def _cmd_bucket(command: str | None) -> float:
    """Stable hash bucket of the first two words of the command (NaN when unknown)."""
    if not command:
        return math.nan
    words = " ".join(command.split()[:2])
    return float(zlib.crc32(words.encode()) % CMD_BUCKETS)


def request_features(req: TTLRequest) -> tuple[str | None, list[float]]:
    """(tool name, ``N_FEATURES`` numeric features) for one call; the model encodes the tool itself.

    Features: command bucket (NaN if none), log1p(context tokens), turn index, log of the job's last
    duration and mean log of its durations so far (both NaN before the job's first measurement).
    """
    durs = req.job_durations
    prev = math.log(durs[-1] + _EPS) if durs else math.nan
    mean_log = float(np.mean(np.log(np.asarray(durs) + _EPS))) if durs else math.nan
    return req.tool_name, [
        _cmd_bucket(req.command),
        math.log1p(max(0, req.context_tokens)),
        float(req.turn_index),
        prev,
        mean_log,
    ]


class QuantileDurationModel:
    """Quantile regressors of log duration at fixed levels; keeps (a bounded copy of) its training set."""

    def __init__(
        self,
        quantiles: Sequence[float] = DEFAULT_QUANTILES,
        max_iter: int = 80,
        min_tool_count: int = 5,
        seed: int = 0,
        keep_rows: int = 20000,
    ) -> None:
        self.quantiles = tuple(sorted(float(q) for q in quantiles))
        self.max_iter = max_iter
        self.min_tool_count = min_tool_count
        self.seed = seed
        self.keep_rows = keep_rows
        self.vocab: dict[str, int] = {}
        self.models: list[HistGradientBoostingRegressor] = []
        self.train_tools: list[str | None] = []
        self.train_x = np.zeros((0, N_FEATURES))
        self.train_y = np.zeros(0)

    @property
    def fitted(self) -> bool:
        return bool(self.models)

    def _encode(self, tools: Sequence[str | None], x: np.ndarray) -> np.ndarray:
        codes = np.array([self.vocab.get(t, 0) if t is not None else math.nan for t in tools], float)
        return np.column_stack([codes, x]) if len(tools) else np.zeros((0, N_FEATURES + 1))

    def fit(self, tools: Sequence[str | None], x: np.ndarray, y: np.ndarray) -> QuantileDurationModel:
        """Fit every level on (tools, features, durations); tools seen < ``min_tool_count`` times share code 0."""
        if len(tools) != len(x) or len(x) != len(y) or len(y) < 10:
            raise ValueError("need >= 10 aligned rows to fit a duration model")
        tools, x, y = list(tools)[-self.keep_rows:], np.asarray(x, float)[-self.keep_rows:], y[-self.keep_rows:]
        self.vocab = self._vocabulary(tools)
        features = self._encode(tools, x)
        target = np.log(np.asarray(y, float) + _EPS)
        # One OpenMP thread: on a small, shared CPU the thread pool's spin-waits cost more than they save.
        with threadpool_limits(limits=1, user_api="openmp"):
            models = [self._fit_one(q, features, target) for q in self.quantiles]
        self.models = models
        self.train_tools, self.train_x, self.train_y = tools, x, np.asarray(y, float)
        return self

    def _vocabulary(self, tools: Sequence[str | None]) -> dict[str, int]:
        """Codes 1.. for the (at most 250) most frequent tools seen >= ``min_tool_count`` times; ties keep
        first-seen order. Every other tool gets code 0 from ``_encode``."""
        counts: dict[str, int] = {}
        for t in tools:
            if t is not None:
                counts[t] = counts.get(t, 0) + 1
        frequent = sorted((t for t, c in counts.items() if c >= self.min_tool_count), key=lambda t: -counts[t])
        return {t: i + 1 for i, t in enumerate(frequent[:250])}

    def _fit_one(self, q: float, features: np.ndarray, target: np.ndarray) -> HistGradientBoostingRegressor:
        from sklearn.ensemble import HistGradientBoostingRegressor

        m = HistGradientBoostingRegressor(
            loss="quantile", quantile=q, max_iter=self.max_iter, learning_rate=0.1, max_leaf_nodes=15,
            min_samples_leaf=20, categorical_features=[0, 1], early_stopping=False, random_state=self.seed,
        )
        return m.fit(features, target)

    def predict_quantiles(self, tools: Sequence[str | None], x: np.ndarray) -> np.ndarray:
        """(n, len(quantiles)) predicted durations in seconds, >= 0 and sorted along each row."""
        if not self.fitted:
            raise RuntimeError("duration model is not fitted")
        features = self._encode(tools, np.asarray(x, float).reshape(len(tools), -1))
        with threadpool_limits(limits=1, user_api="openmp"):
            logq = np.column_stack([m.predict(features) for m in self.models])
        return np.sort(np.maximum(np.exp(logq) - _EPS, 0.0), axis=1)

    def predict_median(self, tools: Sequence[str | None], x: np.ndarray) -> np.ndarray:
        """(n,) the median in seconds, interpolated between the predicted quantiles."""
        q = self.predict_quantiles(tools, x)
        return np.array([np.interp(0.5, self.quantiles, row) for row in q])

    def distribution(self, req: TTLRequest) -> EmpiricalCDF:
        """The call's predicted duration distribution (``P(q_alpha) = alpha``)."""
        tool, feats = request_features(req)
        return EmpiricalCDF.from_quantiles(self.quantiles, self.predict_quantiles([tool], np.array([feats]))[0])

    def save(self, path: str | os.PathLike[str]) -> None:
        """Pickle the model (with its kept training rows) to ``path``."""
        with open(path, "wb") as f:
            pickle.dump({"format": _FORMAT, "model": self}, f)

    @staticmethod
    def load(path: str | os.PathLike[str]) -> QuantileDurationModel:
        """Load a model written by ``save`` (a trusted local file: this unpickles)."""
        with open(path, "rb") as f:
            data = pickle.load(f)  # noqa: S301 - our own artifact
        if not isinstance(data, dict) or data.get("format") != _FORMAT:
            raise ValueError(f"{path}: not an agent-engine duration model")
        return data["model"]


class LearnedTTLPolicy(PaperTTLPolicy):
    """The paper's argmax over a learned distribution where the tool's own history is thin."""

    name = "learned"

    def __init__(
        self,
        history: DurationHistory,
        reload_cost: ReloadCostModel,
        queue_delay: SlidingMean,
        eta: EtaTracker,
        model: QuantileDurationModel | None = None,
        cold_start_samples: int = 100,
        default_ttl: float = 2.0,
        refit_every: int = 1000,
        online_window: int = 20000,
        refit_in_background: bool = True,
        reload_scale: SlidingMean | None = None,
    ) -> None:
        super().__init__(history, reload_cost, queue_delay, eta, cold_start_samples, default_ttl, reload_scale)
        self.model = model
        self.refit_every = refit_every
        self.refit_in_background = refit_in_background
        self.refits = 0
        self._since_refit = 0
        self._online: deque[tuple[str | None, list[float], float]] = deque(maxlen=online_window)
        self._refitting = threading.Lock()

    def distribution(self, req: TTLRequest) -> tuple[EmpiricalCDF | None, str]:
        """The tool's own CDF (``tool``) at >= K samples, else the model's (``learned``), else the paper's."""
        k = self.cold_start_samples
        if req.tool_name is not None and self.history.count(req.tool_name) >= k:
            return self.history.distribution(req.tool_name), "tool"
        if self.model is not None and self.model.fitted:
            return self.model.distribution(req), "learned"
        return super().distribution(req)

    def observe(self, req: TTLRequest, seconds: float) -> None:
        """Record one measured duration with the features the call had; may trigger a refit."""
        tool, feats = request_features(req)
        self._online.append((tool, feats, max(0.0, float(seconds))))
        self._since_refit += 1
        if self.refit_every > 0 and self._since_refit >= self.refit_every:
            self._since_refit = 0
            online = list(self._online)  # a snapshot: the caller's lock protects the deque, not the thread
            if self.refit_in_background:
                threading.Thread(target=self.refit, args=(online,), name="estimator-refit", daemon=True).start()
            else:
                self.refit(online)

    def refit(self, online: list[tuple[str | None, list[float], float]] | None = None) -> bool:
        """Refit on the offline training rows plus online samples (default: all kept); swaps the model.

        Returns False if another refit is running or there are fewer than 10 rows.
        """
        if not self._refitting.acquire(blocking=False):
            return False
        try:
            new = self._refitted_model(list(self._online) if online is None else online)
            if new is None:
                return False
            self.model = new
            self.refits += 1
            return True
        finally:
            self._refitting.release()

    def _refitted_model(self, online: list[tuple[str | None, list[float], float]]) -> QuantileDurationModel | None:
        """A new model (same settings) fitted on the current model's offline rows plus ``online``.

        None below 10 rows. The new model keeps only the offline rows as its own base, so a later
        refit does not count these online rows twice.
        """
        base = self.model or QuantileDurationModel()
        tools = list(base.train_tools) + [o[0] for o in online]
        rows = [*base.train_x.tolist(), *(o[1] for o in online)]
        ys = np.concatenate([base.train_y, np.array([o[2] for o in online], float)])
        if len(ys) < 10:
            return None
        new = QuantileDurationModel(base.quantiles, base.max_iter, base.min_tool_count, base.seed, base.keep_rows)
        new.fit(tools, np.asarray(rows, float), ys)
        n_base = len(base.train_y)
        new.train_tools = tools[:n_base]
        new.train_x = np.asarray(rows[:n_base], float).reshape(-1, N_FEATURES)
        new.train_y = ys[:n_base]
        return new
