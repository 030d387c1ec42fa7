"""Tool-latency estimator: parse a finished turn's tool call, learn tool durations, choose pin TTLs.

Imports neither torch, transformers nor fastapi (a test checks this in a fresh interpreter).
"""

from estimator.durations import DurationHistory, EmpiricalCDF, EtaTracker, JobTracker, SlidingMean
from estimator.estimator import TTL_POLICIES, Estimator, EstimatorConfig, TurnDecision
from estimator.reload_cost import ReloadCostModel
from estimator.tool_parser import ToolCall, normalize_tool_name, parse_tool, parse_tool_call
from estimator.traces import TraceTurn, default_trace_path, read_trace
from estimator.ttl_fixed import FixedTTLPolicy
from estimator.ttl_learned import LearnedTTLPolicy, QuantileDurationModel
from estimator.ttl_paper import PaperTTLPolicy, TTLRequest, best_tau, cap_ttl

ToolLatencyEstimator = Estimator

__all__ = [
    "TTL_POLICIES", "DurationHistory", "EmpiricalCDF", "Estimator", "EstimatorConfig", "EtaTracker",
    "FixedTTLPolicy", "JobTracker", "LearnedTTLPolicy", "PaperTTLPolicy", "QuantileDurationModel",
    "ReloadCostModel", "SlidingMean", "TTLRequest", "ToolCall", "ToolLatencyEstimator", "TraceTurn",
    "TurnDecision", "best_tau", "cap_ttl", "default_trace_path", "normalize_tool_name", "parse_tool",
    "parse_tool_call", "read_trace",
]
