"""The estimator facade the engine and the simulator call: parse, measure, choose TTLs.

Invariants:
- Every public method takes the one lock, so the estimator may be shared by server threads.
- Time is read only from the injected ``Clock`` (when a caller passes no explicit time).
- ``ttl`` returns a float >= 0 (0 = don't pin), never above ``ttl_hint`` when a hint is given.
- A job has at most one pending turn; ``record_turn_arrival`` measures it at most once.
"""

from __future__ import annotations

import threading
from collections import Counter
from dataclasses import dataclass
from typing import Any, Literal

from estimator.durations import DurationHistory, EtaTracker, JobTracker, PendingTurn, SlidingMean
from estimator.reload_cost import ReloadCostModel
from estimator.tool_parser import ToolCall, normalize_tool_name, parse_tool_call
from estimator.ttl_fixed import FixedTTLPolicy
from estimator.ttl_learned import LearnedTTLPolicy, QuantileDurationModel
from estimator.ttl_paper import PaperTTLPolicy, TTLRequest
from scheduler.clock import Clock, MonotonicClock

__all__ = ["Estimator", "EstimatorConfig", "TTL_POLICIES", "TurnDecision"]

TTL_POLICIES = ("fixed", "paper", "learned")
PolicyName = Literal["fixed", "paper", "learned"]


@dataclass(frozen=True)
class EstimatorConfig:
    ttl_policy: PolicyName = "paper"
    pin_threshold: float = 2.0  # fixed: pin this long unless the tool's mean exceeds it
    cold_start_samples: int = 100  # K
    default_ttl: float = 2.0  # paper/learned below K samples in total
    history_window: int = 4096  # durations kept per tool
    all_tools_window: int = 16384  # durations kept over all tools
    queue_delay_window: int = 64  # T: sliding mean over the last unpinned queueing delays
    eta_window_jobs: int = 256
    eta_min_jobs: int = 8  # eta = 1.0 until this many jobs finished
    pin_without_tool: bool = True  # fixed: pin a turn that names no tool (the fork does not)
    learned_model_path: str | None = None
    learned_refit_every: int = 1000  # online refit after this many new samples (0 = never)
    learned_refit_in_background: bool = True
    reload_cost_profile: str | None = None  # JSON written by ReloadCostModel.save

    def __post_init__(self) -> None:
        if self.ttl_policy not in TTL_POLICIES:
            raise ValueError(f"ttl_policy must be one of {TTL_POLICIES}, not {self.ttl_policy!r}")
        if self.cold_start_samples < 1 or self.pin_threshold < 0 or self.default_ttl < 0:
            raise ValueError("cold_start_samples >= 1, pin_threshold >= 0 and default_ttl >= 0")


@dataclass(frozen=True)
class TurnDecision:
    tool_name: str | None
    ttl: float  # seconds; 0 = don't pin


class Estimator:
    """Tool-latency estimator with a selectable TTL policy (``fixed``, ``paper``, ``learned``)."""

    def __init__(
        self,
        config: EstimatorConfig | None = None,
        clock: Clock | None = None,
        reload_cost: ReloadCostModel | None = None,
        learned_model: QuantileDurationModel | None = None,
    ) -> None:
        self.config = cfg = config or EstimatorConfig()
        self.clock = clock or MonotonicClock()
        self._lock = threading.RLock()
        if reload_cost is None:
            reload_cost = ReloadCostModel.load(cfg.reload_cost_profile) if cfg.reload_cost_profile else ReloadCostModel()
        if learned_model is None and cfg.learned_model_path:
            learned_model = QuantileDurationModel.load(cfg.learned_model_path)
        self.history = DurationHistory(cfg.history_window, cfg.all_tools_window)
        self.jobs = JobTracker()
        self.queue_delay = SlidingMean(cfg.queue_delay_window)
        self.reload_scale = SlidingMean(cfg.queue_delay_window, default=1.0)
        self.eta = EtaTracker(cfg.eta_window_jobs, cfg.eta_min_jobs)
        self.fixed = FixedTTLPolicy(self.history, cfg.pin_threshold, cfg.pin_without_tool)
        self.paper = PaperTTLPolicy(
            self.history, reload_cost, self.queue_delay, self.eta, cfg.cold_start_samples, cfg.default_ttl,
            reload_scale=self.reload_scale,
        )
        self.learned = LearnedTTLPolicy(
            self.history, reload_cost, self.queue_delay, self.eta, learned_model, cfg.cold_start_samples,
            cfg.default_ttl, cfg.learned_refit_every, refit_in_background=cfg.learned_refit_in_background,
        )
        self.learned.reload_scale = self.reload_scale
        self.policy: FixedTTLPolicy | PaperTTLPolicy = {"fixed": self.fixed, "paper": self.paper,
                                                         "learned": self.learned}[cfg.ttl_policy]
        self._counters: Counter[str] = Counter()

    # ------------------------------------------------------------------ parsing

    @staticmethod
    def parse_tool(text: str | None, tool_calls: Any = None) -> str | None:
        """``bash:<program>`` / a function name / None; see ``estimator.tool_parser``."""
        call = parse_tool_call(text, tool_calls)
        return None if call is None else call.name

    # ------------------------------------------------------------------ decisions

    def ttl(
        self,
        tool_name: str | None,
        context_tokens: int,
        turn_index: int,
        ttl_hint: float | None = None,
        *,
        job_id: str | None = None,
        command: str | None = None,
    ) -> float:
        """Seconds to pin a finished non-final turn's blocks (0 = don't pin); capped by ``ttl_hint``."""
        with self._lock:
            history: tuple[float, ...] = ()
            if job_id is not None and (st := self.jobs.peek(job_id)) is not None:
                history = tuple(st.durations)
            req = TTLRequest(tool_name, context_tokens, turn_index, ttl_hint, command, history)
            ttl = self.policy.ttl(req)
            self._counters["ttl_calls"] += 1
            self._counters[f"ttl_source_{self.policy.last_source}"] += 1
            if ttl <= 0.0:
                self._counters["ttl_zero"] += 1
            return ttl

    def on_turn_finished(
        self,
        job_id: str,
        *,
        text: str | None = None,
        tool_calls: Any = None,
        tool_name: str | None = None,
        context_tokens: int = 0,
        turn_index: int = 0,
        ttl_hint: float | None = None,
        finish_time: float | None = None,
    ) -> TurnDecision:
        """One call for a finished non-final turn: name its tool (an explicit ``tool_name`` wins over
        parsing), record the finish, and return the TTL."""
        with self._lock:
            call: ToolCall | None = None
            if tool_name is None:
                call = parse_tool_call(text, tool_calls)
                tool_name = None if call is None else call.name
            command = call.command if call is not None else None
            ttl = self.ttl(tool_name, context_tokens, turn_index, ttl_hint, job_id=job_id, command=command)
            self.record_turn_finished(job_id, tool_name, finish_time, context_tokens=context_tokens,
                                      turn_index=turn_index, command=command)
            return TurnDecision(tool_name, ttl)

    # ------------------------------------------------------------------ measurements

    def record_turn_finished(
        self,
        job_id: str,
        tool_name: str | None,
        finish_time: float | None = None,
        *,
        context_tokens: int = 0,
        turn_index: int = 0,
        command: str | None = None,
    ) -> None:
        """A non-final turn of ``job_id`` finished at ``finish_time`` (default: now) having called ``tool_name``."""
        with self._lock:
            t = self.clock.now() if finish_time is None else float(finish_time)
            name = normalize_tool_name(tool_name) if tool_name else None
            self.jobs.finish_turn(job_id, PendingTurn(name, t, turn_index, context_tokens, command))
            self._counters["turns_finished"] += 1

    def record_turn_arrival(self, job_id: str, arrival_time: float | None = None) -> float | None:
        """The job's next turn arrived; returns the measured tool duration (recorded), or None."""
        with self._lock:
            t = self.clock.now() if arrival_time is None else float(arrival_time)
            st = self.jobs.peek(job_id)
            before = tuple(st.durations) if st is not None else ()
            got = self.jobs.arrive(job_id, t)
            if got is None:
                return None
            turn, seconds = got
            if self.history.add(turn.tool_name, seconds):
                self._counters["durations_measured"] += 1
                req = TTLRequest(turn.tool_name, turn.context_tokens, turn.turn_index, None, turn.command, before)
                if self.policy is self.learned:
                    self.learned.observe(req, seconds)
            return seconds

    def record_job_finished(self, job_id: str, num_turns: int) -> None:
        """The job ended after ``num_turns`` turns: feeds eta and forgets the job."""
        with self._lock:
            self.eta.add_job(num_turns)
            self.jobs.forget(job_id)
            self._counters["jobs_finished"] += 1

    def record_unpinned_queue_delay(self, seconds: float) -> None:
        """Queueing delay suffered by a returning turn whose blocks were not pinned (feeds T)."""
        with self._lock:
            self.queue_delay.add(max(0.0, float(seconds)))

    def record_reload(self, context_tokens: int, seconds: float) -> None:
        """A returning turn without a pin re-prefilled ``context_tokens`` in ``seconds`` (scheduled to
        first token). Feeds the online correction of the start-up reload profile R(ctx)."""
        with self._lock:
            predicted = self.paper.reload_cost(context_tokens)
            if predicted > 0 and seconds >= 0:
                self.reload_scale.add(seconds / predicted)

    def set_reload_cost(self, model: ReloadCostModel) -> None:
        """Install the prefill-cost profile measured at start-up."""
        with self._lock:
            self.paper.reload_cost = model
            self.learned.reload_cost = model

    # ------------------------------------------------------------------ queries

    def expected_return_time(self, job_id: str, now: float | None = None) -> float | None:
        """When the job's pending turn is expected back (absolute clock time), or None if none is pending.

        finish + E[D] before that time has passed; afterwards now + E[D - elapsed | D > elapsed]
        (if no recorded duration is that long, now + the mean). Larger = a better pin to release first.
        """
        with self._lock:
            st = self.jobs.peek(job_id)
            if st is None or st.pending is None:
                return None
            turn = st.pending
            now = self.clock.now() if now is None else now
            dist = self.history.distribution(turn.tool_name) if turn.tool_name else None
            if dist is None or len(dist) == 0 or self.history.count(turn.tool_name) < self.config.cold_start_samples:
                dist = self.history.distribution(None)
            if dist is None:
                return turn.finish_time + self.config.default_ttl
            elapsed = max(0.0, now - turn.finish_time)
            residual = dist.residual_mean(elapsed)
            return now + (residual if residual is not None else dist.mean())

    def snapshot(self) -> dict[str, float | int | str]:
        """Counters and current model state for metrics."""
        with self._lock:
            out: dict[str, float | int | str] = dict(self._counters)
            out.update(
                policy=self.config.ttl_policy,
                samples_total=self.history.count(None),
                tools_tracked=len(self.history.tools()),
                pending_jobs=len(self.jobs.pending()),
                queue_delay_T=self.queue_delay.value,
                reload_scale=self.reload_scale.value,
                queue_delay_samples=len(self.queue_delay),
                eta=self.eta.value,
                eta_jobs=len(self.eta),
                learned_model=int(self.learned.model is not None and self.learned.model.fitted),
                learned_refits=self.learned.refits,
            )
            return out
