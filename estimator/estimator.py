"""The estimator facade the engine and the simulator call: parse, measure, choose TTLs, track jobs.

Invariants:
- Every public method takes the one lock, so the estimator may be shared by server threads.
- Time is read only from the injected ``Clock`` (when a caller passes no explicit time).
- ``ttl`` returns a float >= 0 (0 = don't pin), never above ``ttl_hint`` when a hint is given.
- A job has at most one pending turn; ``record_turn_arrival`` measures it at most once.
- A job is active from its first ``on_turn_arrival`` until ``end_job`` / ``record_job_finished``
  (or until the bounded tracker forgets it); only active jobs have a first arrival and a turn count.
  What it knows of a job is on the job's record in a ``JobTable`` (``estimator.job_tracker``): its
  own, or the scheduler's once ``keep_jobs_in`` shares that (the engine does, before any job arrives).
"""

from __future__ import annotations

import threading
from collections import Counter

from estimator.config import TTL_POLICIES, EstimatorConfig, TurnDecision
from estimator.durations import DurationHistory, EmpiricalCDF, EtaTracker, SlidingMean
from estimator.job_tracker import JobTracker, PendingTurn
from estimator.reload_cost import ReloadCostModel
from estimator.tool_parser import ToolCall, normalize_tool_name, parse_tool, parse_tool_call
from estimator.ttl_fixed import FixedTTLPolicy
from estimator.ttl_learned import LearnedTTLPolicy, QuantileDurationModel
from estimator.ttl_paper import PaperTTLPolicy, TTLRequest
from scheduler.clock import Clock, MonotonicClock
from scheduler.job_table import JobTable

__all__ = ["Estimator", "EstimatorConfig", "TTL_POLICIES", "TurnDecision"]


class Estimator:
    """Tool-latency estimator with a selectable TTL policy (``fixed``, ``paper``, ``learned``)."""

    def __init__(
        self,
        config: EstimatorConfig | None = None,
        clock: Clock | None = None,
        reload_cost: ReloadCostModel | None = None,
        learned_model: QuantileDurationModel | None = None,
    ) -> None:
        """``reload_cost`` / ``learned_model`` default to the config's files (if named), else R's defaults
        and no model."""
        self.config = cfg = config or EstimatorConfig()
        self.clock = clock or MonotonicClock()
        self._lock = threading.RLock()
        if reload_cost is None:
            reload_cost = ReloadCostModel.load(cfg.reload_cost_profile) if cfg.reload_cost_profile else ReloadCostModel()
        if learned_model is None and cfg.learned_model_path:
            learned_model = QuantileDurationModel.load(cfg.learned_model_path)
        self.history = DurationHistory(cfg.history_window, cfg.all_tools_window)
        self.jobs = JobTracker(forecast=self)
        self.queue_delay = SlidingMean(cfg.queue_delay_window)
        self.reload_scale = SlidingMean(cfg.queue_delay_window, default=1.0)
        self.eta = EtaTracker(cfg.eta_window_jobs, cfg.eta_min_jobs)
        self._build_policies(reload_cost, learned_model)
        self._counters: Counter[str] = Counter()

    def _build_policies(self, reload_cost: ReloadCostModel, learned_model: QuantileDurationModel | None) -> None:
        """All three policies share the measurements; ``policy`` is the configured one."""
        cfg = self.config
        self.fixed = FixedTTLPolicy(self.history, cfg.pin_threshold, cfg.pin_without_tool)
        self.paper = PaperTTLPolicy(
            self.history, reload_cost, self.queue_delay, self.eta, cfg.cold_start_samples, cfg.default_ttl,
            reload_scale=self.reload_scale,
        )
        self.learned = LearnedTTLPolicy(
            self.history, reload_cost, self.queue_delay, self.eta, learned_model, cfg.cold_start_samples,
            cfg.default_ttl, cfg.learned_refit_every, refit_in_background=cfg.learned_refit_in_background,
            reload_scale=self.reload_scale,
        )
        self.policy: FixedTTLPolicy | PaperTTLPolicy = {"fixed": self.fixed, "paper": self.paper,
                                                         "learned": self.learned}[cfg.ttl_policy]

    # ------------------------------------------------------------------ parsing

    @staticmethod
    def parse_tool(text: str | None, tool_calls: object = None) -> str | None:
        """``bash:<program>`` / a function name / None; see ``estimator.tool_parser``."""
        return parse_tool(text, tool_calls)

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
        tool_calls: object = None,
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

    def set_tier_reload_cost(self, model: ReloadCostModel | None) -> None:
        """Install the second tier's load-cost profile (None: no tier): an expired pin's blocks are
        demoted, so a late return pays the cheaper of a reload from the tier and a re-prefill."""
        with self._lock:
            self.paper.tier_reload_cost = model
            self.learned.tier_reload_cost = model

    # ------------------------------------------------------------------ jobs

    def keep_jobs_in(self, jobs: JobTable) -> None:
        """Keep the per-job state on ``jobs``' records (the scheduler's table) from now on; only while no
        job is tracked yet (``ValueError`` otherwise)."""
        with self._lock:
            if len(self.jobs):
                raise ValueError("the estimator already tracks jobs: share a job table before the first arrives")
            self.jobs = JobTracker(self.jobs.max_jobs, self.jobs.max_durations_per_job, table=jobs, forecast=self)

    def on_turn_arrival(self, job_id: str, now: float | None = None) -> float:
        """A turn of ``job_id`` arrived at ``now`` (default: the clock): counts it and, unless it is the
        job's first, measures the tool duration of its pending turn. Returns the job's first arrival
        (the program-level FCFS key)."""
        with self._lock:
            t = self.clock.now() if now is None else float(now)
            if self.job_first_arrival(job_id) is not None:
                self.record_turn_arrival(job_id, t)
            return self.jobs.turn_arrived(job_id, t)

    def job_first_arrival(self, job_id: str) -> float | None:
        """When the job's first turn arrived; None unless the job is active."""
        with self._lock:
            st = self.jobs.peek(job_id)
            return None if st is None else st.first_arrival

    def job_turns(self, job_id: str) -> int | None:
        """How many turns of the job arrived so far; None unless the job is active."""
        with self._lock:
            st = self.jobs.peek(job_id)
            return None if st is None or st.first_arrival is None else st.turns

    def end_job(self, job_id: str) -> tuple[int, float] | None:
        """End an active job: feeds eta with its turn count and forgets it. Returns ``(turns,
        first_arrival)``, or None (and changes nothing) if the job is not active; so it is idempotent."""
        with self._lock:
            st = self.jobs.peek(job_id)
            if st is None or st.first_arrival is None:
                return None
            self.record_job_finished(job_id, st.turns)
            return st.turns, st.first_arrival

    def active_jobs(self) -> int:
        """Jobs whose first turn arrived and that have not ended (nor been forgotten) yet."""
        with self._lock:
            return self.jobs.active

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
            return self.expected_return(st.pending, self.clock.now() if now is None else now)

    def expected_return(self, turn: PendingTurn, now: float) -> float:
        """When the job of ``turn`` (its pending turn) is expected back, as of ``now`` (see
        ``expected_return_time``); what a job's record answers for its estimate."""
        with self._lock:
            dist = self._return_distribution(turn.tool_name)
            if dist is None:
                return turn.finish_time + self.config.default_ttl
            elapsed = max(0.0, now - turn.finish_time)
            residual = dist.residual_mean(elapsed)
            return now + (residual if residual is not None else dist.mean())

    def _return_distribution(self, tool_name: str | None) -> EmpiricalCDF | None:
        """The tool's CDF once it has K samples, else the CDF over all tools (None while there is none)."""
        dist = self.history.distribution(tool_name) if tool_name else None
        if dist is None or self.history.count(tool_name) < self.config.cold_start_samples:
            dist = self.history.distribution(None)
        return dist

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
