"""Tool-latency estimator: parse a finished turn's tool call, learn tool durations, choose pin TTLs.

Also what the engine knows of a job's turns (first arrival, turn count, pending turn; see
``estimator.job_tracker``), kept on the job's record in the scheduler's ``JobTable``.
Imports neither torch, transformers, fastapi nor ``agent_engine`` (a test checks the first three in a
fresh interpreter); trace files are read by ``agent_engine``, whose trace turns satisfy ``ToolTurn``.
"""

from estimator.config import TTL_POLICIES, EstimatorConfig, TurnDecision
from estimator.durations import DurationHistory, EmpiricalCDF, EtaTracker, SlidingMean
from estimator.estimator import Estimator
from estimator.fitting import ToolTurn, fit_learned_model, holdout_mae, is_holdout, trace_dataset
from estimator.job_tracker import JobEstimate, JobTracker, PendingTurn
from estimator.reload_cost import ReloadCostModel
from estimator.tool_parser import ToolCall, normalize_tool_name, parse_tool, parse_tool_call
from estimator.ttl_fixed import FixedTTLPolicy
from estimator.ttl_learned import LearnedTTLPolicy, QuantileDurationModel
from estimator.ttl_paper import PaperTTLPolicy, TTLRequest, best_tau, cap_ttl

__all__ = [
    "TTL_POLICIES", "DurationHistory", "EmpiricalCDF", "Estimator", "EstimatorConfig", "EtaTracker",
    "FixedTTLPolicy", "JobEstimate", "JobTracker", "LearnedTTLPolicy", "PaperTTLPolicy", "PendingTurn",
    "QuantileDurationModel", "ReloadCostModel", "SlidingMean", "TTLRequest", "ToolCall", "ToolTurn",
    "TurnDecision", "best_tau", "cap_ttl", "fit_learned_model", "holdout_mae", "is_holdout",
    "normalize_tool_name", "parse_tool", "parse_tool_call", "trace_dataset",
]
