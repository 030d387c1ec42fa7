"""Run the agent's bash commands in a confined, temporary copy of a repository.

Modules: ``core`` (``Sandbox``, ``CommandResult``), ``confine`` (the exec chain: namespaces, uid,
the probe), ``limits`` (rlimits), ``cgroup`` (the pids cgroup), ``reaper`` (finding and killing our
processes), ``stream`` (reading output against a deadline), ``output`` (bounded head/tail capture).
What each mode enforces is listed in docs/sandbox.md and returned by ``Sandbox.enforced()``.
"""

from agent_engine.agent.sandbox.confine import ISOLATION_MODES
from agent_engine.agent.sandbox.core import (
           KILL_GRACE_S,
           TIMEOUT_EXIT_CODE,
           CommandResult,
           Sandbox,
           minimal_env,
)
from agent_engine.agent.sandbox.limits import Limits
from agent_engine.agent.sandbox.output import truncate_output

__all__ = ["ISOLATION_MODES", "KILL_GRACE_S", "TIMEOUT_EXIT_CODE", "CommandResult", "Limits", "Sandbox",
           "minimal_env", "truncate_output"]
