"""``ServerConfig``: the start-up options of one server (listen address, auth, admission, shutdown, logs).

Invariants:
- Built once, from the command line (``ServerConfig.from_args`` in ``serve``) or directly (tests,
  embedders), and never changed afterwards (frozen); ``build_app`` and ``serve`` read it, nothing else.
- ``add_arguments`` is the one definition of the server flags; their defaults are the field defaults.
- Standard library only, so ``agent-engine serve --help`` stays light (the tool-call parser names come
  from ``server.tools.parser``, the grammar limits' defaults from ``engine.grammar_limits``, the open
  jobs' idle time from ``server.open_jobs``, all standard library only).
"""

from __future__ import annotations

import argparse
from dataclasses import dataclass

from agent_engine.engine.grammar_limits import GrammarLimits
from agent_engine.server.open_jobs import IDLE_S

LOG_LEVELS = ("critical", "error", "warning", "info", "debug")
DEFAULT_MAX_BODY_BYTES = 32 * 1024 * 1024
DEFAULT_MAX_PROMPTS = 64
DEFAULT_STALL_TIMEOUT_S = 60.0


@dataclass(frozen=True)
class ServerConfig:
    """Where to listen, who may call ``/v1/*``, when to shed load, how long to drain, how much to log.

    ``api_keys`` empty leaves ``/v1/*`` open (one key: one tenant; several: one tenant each, or one per
    name in ``key_tenants``, see ``server.auth``); ``max_waiting`` None admits without bound; ``drain_timeout`` is how long
    in-flight requests may run after SIGTERM before they are aborted; ``tool_call_parser`` is the
    tool-call format read from chat outputs ("auto": the chat template's); ``max_body_bytes`` bounds a
    request body (413 past it); ``open_metrics`` serves ``/metrics`` and the API docs without a key;
    ``share_prefix_cache`` lets tenants share cached prefixes (off: each tenant's salt walls its own).

    Fairness (docs/limits.md): ``tenant_max_requests`` bounds one tenant's requests in flight (None:
    half of ``max_num_seqs`` when there are several tenants, no bound with one);
    ``tenant_max_open_jobs`` bounds the agent jobs one tenant holds open (``server.open_jobs``; None:
    ``max_num_seqs`` when there are several tenants, no bound with one); ``max_prompts`` and
    ``max_request_tokens`` (None: 8 x ``max_model_len``) bound one request's batch;
    ``tokenizer_workers`` threads prepare prompts, one tenant using at most all but one;
    ``tenant_body_rate`` (MiB/s) is what one tenant's request bodies may average with several tenants;
    ``header_timeout`` / ``body_timeout`` close connections whose headers, or refuse requests whose
    body, did not arrive in time; ``admin_keys`` read every tenant's ``/metrics`` series.

    Output constraints (docs/structured-outputs.md): ``grammar_limits`` (time budget, size cap and
    worker processes of a new grammar's compile); ``health_stall_timeout`` is how long the step loop
    may go without advancing while it has work before ``/health`` answers 503.
    """

    host: str = "127.0.0.1"
    port: int = 8000
    api_keys: tuple[str, ...] = ()
    key_tenants: tuple[tuple[str, str], ...] = ()  # (key, tenant name): keys naming one tenant share it
    max_waiting: int | None = None
    drain_timeout: float = 10.0
    log_level: str = "info"
    tool_call_parser: str = "auto"
    max_body_bytes: int = DEFAULT_MAX_BODY_BYTES
    open_metrics: bool = False
    share_prefix_cache: bool = False
    tenant_max_requests: int | None = None
    tenant_max_open_jobs: int | None = None
    max_prompts: int = DEFAULT_MAX_PROMPTS
    max_request_tokens: int | None = None
    tokenizer_workers: int = 2
    tenant_body_rate: float = 16.0
    header_timeout: float = 10.0
    body_timeout: float = 30.0
    admin_keys: tuple[str, ...] = ()
    grammar_limits: GrammarLimits = GrammarLimits()
    health_stall_timeout: float = DEFAULT_STALL_TIMEOUT_S

    def __post_init__(self) -> None:
        from agent_engine.server.tools.parser import family_name

        if self.log_level not in LOG_LEVELS:
            raise ValueError(f"log_level must be one of {', '.join(LOG_LEVELS)}, not {self.log_level!r}")
        if self.max_body_bytes < 1024:
            raise ValueError("max_body_bytes must be at least 1024")
        for name in ("tenant_max_requests", "tenant_max_open_jobs", "max_prompts", "max_request_tokens",
                     "tokenizer_workers"):
            value = getattr(self, name)
            if value is not None and value < 1:
                raise ValueError(f"{name} must be at least 1")
        if not (self.header_timeout > 0 and self.body_timeout > 0 and self.tenant_body_rate > 0
                and self.health_stall_timeout > 0):
            raise ValueError("header_timeout, body_timeout, tenant_body_rate and health_stall_timeout must be > 0")
        object.__setattr__(self, "api_keys", tuple(k for k in self.api_keys if k))
        object.__setattr__(self, "admin_keys", tuple(k for k in self.admin_keys if k))
        object.__setattr__(self, "tool_call_parser", family_name(self.tool_call_parser) or "auto")

    @staticmethod
    def add_arguments(parser: argparse.ArgumentParser) -> None:
        """Add the "server options" group (host, port, API key, admission, shutdown, logging) and the
        "tool calling options" group."""
        d = ServerConfig()
        g = parser.add_argument_group("server options")
        g.add_argument("--host", default=d.host, help=f"address to listen on (default: {d.host})")
        g.add_argument("--port", type=int, default=d.port, help=f"TCP port to listen on (default: {d.port})")
        g.add_argument("--max-waiting", type=int, default=d.max_waiting,
                       help="answer 503 + Retry-After when more than N requests are queued "
                            "(default: unbounded)")
        g.add_argument("--drain-timeout", type=float, default=d.drain_timeout,
                       help="seconds in-flight requests may run after SIGTERM before they are aborted "
                            f"(default: {d.drain_timeout:g})")
        g.add_argument("--log-level", default=d.log_level, choices=list(LOG_LEVELS),
                       help=f"log level of the server and uvicorn (default: {d.log_level})")
        _add_security_arguments(parser, d)
        _add_tool_arguments(parser, d)

    @classmethod
    def from_args(cls, args: argparse.Namespace) -> ServerConfig:
        """The config of parsed ``add_arguments`` flags; ValueError for an unreadable keys file."""
        keys, named = list(args.api_key or []), {}
        if args.api_keys_file:
            from agent_engine.server.auth import load_keys_file

            file_keys, named = load_keys_file(args.api_keys_file)
            keys += file_keys
        return cls(host=args.host, port=args.port, api_keys=tuple(keys), key_tenants=tuple(sorted(named.items())),
                   max_waiting=args.max_waiting,
                   drain_timeout=args.drain_timeout, log_level=args.log_level,
                   tool_call_parser=args.tool_call_parser, max_body_bytes=args.max_body_bytes,
                   open_metrics=args.open_metrics, share_prefix_cache=args.share_prefix_cache,
                   tenant_max_requests=args.tenant_max_requests, tenant_max_open_jobs=args.tenant_max_open_jobs,
                   max_prompts=args.max_prompts_per_request,
                   max_request_tokens=args.max_request_tokens, tokenizer_workers=args.tokenizer_workers,
                   tenant_body_rate=args.tenant_body_rate,
                   header_timeout=args.header_timeout, body_timeout=args.body_timeout,
                   admin_keys=tuple(args.admin_key or ()),
                   grammar_limits=GrammarLimits(args.grammar_compile_timeout, args.max_grammar_size,
                                                args.grammar_workers),
                   health_stall_timeout=args.health_stall_timeout)


def _add_security_arguments(parser: argparse.ArgumentParser, d: ServerConfig) -> None:
    """The "security options" group: keys and tenants, what stays open, the body-size limit."""
    g = parser.add_argument_group("security options")
    g.add_argument("--api-key", action="append", default=None, metavar="KEY",
                   help="require this key ('Authorization: Bearer KEY' or 'x-api-key: KEY') on /v1/*, "
                        "/metrics and the docs; repeat for several tenants (default: no authentication)")
    g.add_argument("--api-keys-file", default=None, metavar="FILE",
                   help="more keys, one a line ('#' comments); each key is a tenant, or 'KEY TENANT' lines: "
                        "the keys naming one tenant are that tenant (its shares count across its keys)")
    g.add_argument("--open-metrics", action="store_true",
                   help="serve /metrics and the API docs without a key (default: behind the key)")
    g.add_argument("--share-prefix-cache", action="store_true",
                   help="let tenants share cached prefixes (default: each tenant's cache is its own)")
    g.add_argument("--max-body-bytes", type=int, default=d.max_body_bytes,
                   help=f"largest request body; larger ones get 413 (default: {d.max_body_bytes})")
    g.add_argument("--admin-key", action="append", default=None, metavar="KEY",
                   help="a key that reads every tenant's series on /metrics (tenant keys see their own)")
    g.add_argument("--header-timeout", type=float, default=d.header_timeout,
                   help=f"close a connection whose request headers take longer (default: {d.header_timeout:g} s)")
    g.add_argument("--body-timeout", type=float, default=d.body_timeout,
                   help=f"408 for a request body that takes longer to arrive (default: {d.body_timeout:g} s)")
    _add_fairness_arguments(parser, d)


def _add_fairness_arguments(parser: argparse.ArgumentParser, d: ServerConfig) -> None:
    """The "fairness options" group: what one tenant and one request may take."""
    g = parser.add_argument_group("fairness options")
    g.add_argument("--tenant-max-requests", type=int, default=d.tenant_max_requests, metavar="N",
                   help="429 + Retry-After for a tenant with N requests queued or running (default: half "
                        "of --max-num-seqs with several API keys, unbounded with one)")
    g.add_argument("--tenant-max-open-jobs", type=int, default=d.tenant_max_open_jobs, metavar="N",
                   help="429 + Retry-After for a turn that would open a tenant's N+1st agent job (one whose "
                        "last turn had is_last_step false and that was not released, idle under "
                        f"{IDLE_S:g} s); turns of open jobs always pass (default: --max-num-seqs with "
                        "several API keys, unbounded with one)")
    g.add_argument("--max-prompts-per-request", type=int, default=d.max_prompts,
                   help=f"most prompts in one completions request (default: {d.max_prompts})")
    g.add_argument("--max-request-tokens", type=int, default=d.max_request_tokens,
                   help="most prompt plus max_tokens tokens in one request (default: 8 x --max-model-len)")
    g.add_argument("--tenant-body-rate", type=float, default=d.tenant_body_rate, metavar="MIB_PER_S",
                   help="with several API keys, request-body MiB a second one tenant may send (bursts up to "
                        f"--max-body-bytes); faster gets 429 (default: {d.tenant_body_rate:g})")
    g.add_argument("--tokenizer-workers", type=int, default=d.tokenizer_workers,
                   help="threads preparing prompts; one tenant uses at most all but one "
                        f"(default: {d.tokenizer_workers})")
    lim = d.grammar_limits
    g.add_argument("--grammar-compile-timeout", type=float, default=lim.timeout_s, metavar="SECONDS",
                   help="a new output format (JSON schema, regex, grammar, tool schemas) that does not compile "
                        f"within this many seconds is refused with a 400 (default: {lim.timeout_s:g})")
    g.add_argument("--max-grammar-size", type=int, default=lim.max_size, metavar="N",
                   help="output formats whose grammar has more elements are refused with a 400 before "
                        f"compiling (default: {lim.max_size})")
    g.add_argument("--grammar-workers", type=int, default=lim.workers,
                   help="processes compiling new output formats; one tenant uses at most all but one "
                        f"(default: {lim.workers})")
    g.add_argument("--health-stall-timeout", type=float, default=d.health_stall_timeout, metavar="SECONDS",
                   help="/health answers 503 while the engine has work and its step loop has not advanced "
                        f"for this long (default: {d.health_stall_timeout:g})")


def _add_tool_arguments(parser: argparse.ArgumentParser, d: ServerConfig) -> None:
    """The "tool calling options" group: ``--tool-call-parser`` and vLLM's ``--enable-auto-tool-choice``
    (accepted, no effect)."""
    from agent_engine.server.tools.parser import FAMILIES

    g = parser.add_argument_group("tool calling options")
    g.add_argument("--tool-call-parser", default=d.tool_call_parser, choices=["auto", *FAMILIES],
                   help="the tool-call format read from chat outputs when a request has tools "
                        f"(default: {d.tool_call_parser}: the chat template's, else hermes)")
    g.add_argument("--enable-auto-tool-choice", action="store_true",
                   help="accepted for vLLM compatibility; tool calls are always parsed when a request "
                        "has tools and tool_choice is not 'none'")
