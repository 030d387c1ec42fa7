"""The engine: the step loop over scheduler and model runner, its parts, outputs and detokenization."""
