"""GPU-scale discrete-event simulator: the real scheduler and estimator, timed by a cost model.

Modules: ``specs`` (model and GPU tables), ``cost_model`` (step time, KV pool size), ``sim_config`` (a
run's ``EngineConfig``, pool and workload), ``policy_label`` (the policy-label grammar, shared with
``bench jct``), ``simulator`` (the event loop),
``result`` (a run's measurements), ``sweep`` (policies x loads, the 2x-unloaded load, the plot),
``calibrate`` (fits the CPU constants on the real engine; the only module that imports torch, and
only inside ``measure``), ``cli`` (``agent-engine sim``). Nothing here imports torch or transformers
at import time.
"""
