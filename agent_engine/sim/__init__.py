"""GPU-scale discrete-event simulator: the real scheduler and estimator, timed by a cost model.

``specs`` (model and GPU tables), ``cost_model`` (step time, KV pool size), ``simulator`` (the event
loop), ``sweep`` lives in ``cli`` (policies x loads, JSON and PNG), ``calibrate`` (fits the CPU
constants on the real engine; the only module that imports torch). Nothing here imports torch or
transformers at import time.
"""
