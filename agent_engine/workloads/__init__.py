"""Agent workloads: the trace format, profiles and synthesis, and the replay client that drives a server."""
