"""Scale out on Ray Serve: N engine replicas behind one ingress, each job routed to the replica holding
its pins.

Layout: ``bridge`` (an HTTP request as data, run through an ASGI app in-process; no Ray),
``route_key`` (a request's job and prompt prefix chain; no Ray), ``metrics`` (the ingress's merged,
replica-labelled ``/metrics``), ``routers`` (Ray Serve request routers: job affinity, Ray's power of
two and round robin), ``registry`` (the routers of this process, for the ingress), ``replica`` (one
engine replica: the single server's app in-process), ``relay`` (one request relayed to a replica,
retried while nothing was sent), ``ingress`` (the HTTP entry and the fan-outs), ``app`` (the Serve
application and its builder; ``serve_config.yaml`` is its config for ``serve run``/``serve deploy``),
``serve`` (``agent-engine serve --replicas N``).

Invariants: this package is the only one that imports Ray; importing the package (or ``bridge``,
``route_key``) does not, so the engine and its tests run without Ray. The routing decisions
themselves live in ``agent_engine.routing`` (pure Python, shared with the simulator).
"""
