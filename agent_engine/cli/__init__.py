"""The ``agent-engine`` command line."""
