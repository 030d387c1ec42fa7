"""The model side: loading checkpoints, the embedded default model, the runner, attention and sampling."""
