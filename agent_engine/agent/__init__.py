"""A live mini-swe-agent style shell agent: sandbox, agent loop, concurrent runner, CLI, tiny test model.

Modules: ``sandbox`` (run one command in a temp copy of a repo), ``chat`` (one model call),
``loop`` (one job), ``runner`` (many jobs, records, traces), ``cli`` (``agent-engine agent``),
``task_set`` (``AgentTask``, task files and the shipped task set under ``tasks/``),
``tiny_agent_model`` (a model trained in seconds that issues scripted commands). Importing this
package imports none of them; ``sandbox``, ``chat``, ``loop``, ``runner`` and ``cli`` import neither
torch nor transformers (the client runs anywhere).
"""
