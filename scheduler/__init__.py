"""Pure-Python scheduling core: requests, block pool, prefix cache, KV cache manager, policies and pins.

Imports neither torch, transformers nor fastapi (a test checks this in a fresh interpreter).
"""

from scheduler.block_pool import BlockPool, FreeBlockQueue, KVCacheBlock
from scheduler.clock import Clock, FakeClock, MonotonicClock
from scheduler.config import SchedulerConfig
from scheduler.fake_runner import FakeRunner
from scheduler.job_hints import NO_HINTS, JobHints
from scheduler.job_record import JobRecord
from scheduler.job_table import JobListener, JobTable
from scheduler.kv_cache_manager import KVCacheManager
from scheduler.observability import SchedulerStats
from scheduler.policy import (
    POLICY_NAMES,
    ContinuumPolicy,
    EndReason,
    FcfsPolicy,
    Lease,
    LeaseCounters,
    LeaseState,
    LeaseTable,
    PinStats,
    PriorityPolicy,
    SchedulingPolicy,
    policy_class,
)
from scheduler.request import Request, RequestStatus
from scheduler.sampling_params import SamplingParams
from scheduler.scheduler import Scheduler
from scheduler.step_io import (
    EngineCoreOutput,
    ModelRunnerOutput,
    ScheduledRequest,
    SchedulerOutput,
    StepOutputs,
)
from scheduler.structured import StructuredSpec

__all__ = [
    "NO_HINTS", "POLICY_NAMES", "BlockPool", "Clock", "ContinuumPolicy", "EndReason", "EngineCoreOutput", "FakeClock",
    "FakeRunner", "FcfsPolicy", "FreeBlockQueue", "JobHints", "JobListener", "JobRecord", "JobTable", "KVCacheBlock",
    "KVCacheManager", "Lease", "LeaseCounters", "LeaseState", "LeaseTable", "ModelRunnerOutput", "MonotonicClock", "PinStats", "PriorityPolicy",
    "Request", "RequestStatus", "SamplingParams", "ScheduledRequest", "Scheduler", "SchedulerConfig",
    "SchedulerOutput", "SchedulerStats", "SchedulingPolicy", "StepOutputs", "policy_class", "StructuredSpec",
]
