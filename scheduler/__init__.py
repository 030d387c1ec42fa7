"""Pure-Python scheduling core: requests, block pool, prefix cache, KV cache manager, pins, policies.

Imports neither torch, transformers nor fastapi (a test checks this in a fresh interpreter).
"""

from scheduler.block_pool import BlockPool, FreeBlockQueue, KVCacheBlock
from scheduler.clock import Clock, FakeClock, MonotonicClock
from scheduler.config import SchedulerConfig, SchedulingPolicy
from scheduler.fake_runner import FakeRunner
from scheduler.kv_cache_manager import KVCacheManager
from scheduler.outputs import EngineCoreOutput, ModelRunnerOutput, ScheduledRequest, SchedulerOutput
from scheduler.pins import PinCounters, PinLease, PinTable
from scheduler.request import Request, RequestStatus
from scheduler.sampling_params import SamplingParams
from scheduler.scheduler import Scheduler, SchedulerStats

__all__ = [
    "BlockPool", "Clock", "EngineCoreOutput", "FakeClock", "FakeRunner", "FreeBlockQueue", "KVCacheBlock",
    "KVCacheManager", "ModelRunnerOutput", "MonotonicClock", "PinCounters", "PinLease", "PinTable",
    "Request", "RequestStatus", "SamplingParams", "ScheduledRequest", "Scheduler", "SchedulerConfig",
    "SchedulerOutput", "SchedulerStats", "SchedulingPolicy",
]
