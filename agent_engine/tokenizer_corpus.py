"""The fixed, machine-independent training corpus of the embedded default tokenizer.

Invariants:
- ``corpus_texts()`` depends only on this file: no file system, no stdlib sources, no hash seeds,
  no locale. The expansion uses a private xorshift PRNG (``_XorShift64``) instead of ``random`` so a
  change in Python's ``random`` internals can never change the tokenizer.
- Changing anything here changes the tokenizer, so it must come with a new ``DEFAULT_MODEL_VERSION``
  in ``agent_engine.default_model``.
"""

from __future__ import annotations

from collections.abc import Iterator

CORPUS_SEED = 0x5EED_C0DE_2024

_ENGLISH = """\
The scheduler decides which requests run in the next step, and the model runner executes them.
Each request carries its prompt tokens, its output tokens and the number of tokens already computed.
An agent job is a loop: the model writes a turn, calls a tool, reads the result and writes again.
When a turn finishes, the engine usually frees its cache blocks at once, even if the next turn is near.
Keeping those blocks for a short time can save a full prefill when the next turn arrives.
The time to live of a pinned turn is predicted from the tool that the turn called.
A quick shell command returns in milliseconds, while a full test suite may take minutes.
Job completion time is the measure that matters: the time from the first turn to the last answer.
Please summarize the following document in three sentences, keeping the important numbers.
The quick brown fox jumps over the lazy dog while the five boxing wizards jump quickly.
She opened the window, looked at the rain, and decided that the report could wait until Monday.
In 1969, two astronauts walked on the Moon while a third orbited above them in the command module.
Water boils at 100 degrees Celsius at sea level, but at a lower temperature on a high mountain.
The library opens at nine o'clock in the morning and closes at six in the evening on weekdays.
If you have any questions about your order, please contact our support team by email or phone.
Photosynthesis converts light energy into chemical energy stored in glucose and other sugars.
The committee will review every proposal and announce its decision before the end of the month.
He was not sure whether the train would arrive on time, so he called a taxi just in case.
Most bridges are designed to carry far more weight than they will ever see in normal use.
A good test is small, fast and deterministic; it fails for one reason and says which one.
Memory is limited, so the cache manager must decide which blocks to keep and which to evict.
The least recently used block is evicted first, unless it is still referenced by a running request.
Reference counts must never become negative, and every block is either free or in use.
Prefix caching lets two requests with the same system prompt share the same physical blocks.
Chunked prefill splits a long prompt into pieces, so decode steps of other requests are not delayed.
Throughput rises with batch size until the accelerator runs out of memory or compute.
Latency is what a single user feels; throughput is what the operator pays for.
Our quarterly revenue grew by twelve percent, driven mostly by new customers in Europe and Asia.
The recipe calls for two cups of flour, one egg, a pinch of salt and a little warm milk.
Turn left at the second traffic light, then continue straight for about three hundred meters.
The museum's new exhibition explores the history of maps, from clay tablets to satellite images.
Scientists observed the comet for several weeks before it disappeared behind the Sun.
Could you explain the difference between a process and a thread in simple terms?
Sure! A process has its own memory space, while threads inside one process share memory.
I think the bug is in the loop condition: it stops one element too early.
Let me check the logs first, and then I will run the failing test again with more output.
The meeting has been moved to Thursday at 3 p.m.; the agenda is attached to this message.
Thank you for your patience. Your request has been received and will be processed shortly.
Everything that can be measured should be measured twice before anyone makes a decision.
Rivers carry sediment to the sea, building deltas that slowly change the shape of the coast.
Once upon a time, in a small village by the sea, there lived an old fisherman and his cat.
The weather forecast says it will be sunny tomorrow, with a high of twenty-four degrees.
Errors should never pass silently, unless they are explicitly silenced.
Simple is better than complex, and complex is better than complicated.
Readability counts, and special cases are not special enough to break the rules.
Note: the configuration file must be valid JSON; comments and trailing commas are not allowed.
Warning: this operation cannot be undone. Are you sure you want to delete all files?
Step 1: read the issue. Step 2: reproduce the bug. Step 3: write a test. Step 4: fix it.
The average response time dropped from 850 ms to 120 ms after we enabled the prefix cache.
What is the capital of France? The capital of France is Paris.
How many legs does a spider have? A spider has eight legs.
Translate to German: Good morning, how are you? Guten Morgen, wie geht es dir?
Translate to French: The cat sleeps on the sofa. Le chat dort sur le canapé.
Translate to Spanish: Where is the train station? ¿Dónde está la estación de tren?
Café, naïve, résumé, façade, jalapeño, Zürich, São Paulo, Kraków and Ångström are all words.
Numbers: 0 1 2 3 4 5 6 7 8 9 10 42 100 256 1024 4096 65536 3.14159 2.71828 -1 1e-5 0x1F.
Dates and times: 2024-01-15, 12:30:45, Monday 3 June, 09:00 UTC, 1.5 seconds, 250 milliseconds.
"""

_MULTILINGUAL = """\
你好，世界！今天天气很好，我们去公园散步吧。
机器学习模型需要大量的数据和计算资源。
こんにちは、世界。今日はいい天気ですね。
東京は日本の首都で、人口が多い都市です。
안녕하세요, 세계! 오늘 날씨가 좋네요.
Привет, мир! Как у тебя дела сегодня?
Γειά σου κόσμε! Η θάλασσα είναι γαλάζια.
مرحبا بالعالم، كيف حالك اليوم؟
שלום עולם, מה שלומך היום?
नमस्ते दुनिया, आज मौसम अच्छा है।
Emoji: 😀 😂 🚀 🔥 ✅ ❌ ⚠️ 🎉 👍 🙏 💡 📦 🐍 🦀 🌍 ❤️ 👩‍💻 🧪 ⏱️ 🤖
Symbols: → ← ↑ ↓ ≤ ≥ ≠ ≈ ∞ ∑ ∫ √ π λ μ σ Ω € £ ¥ © ® ™ ° ± × ÷ … • « » “ ” ‘ ’ — –
Box drawing: ┌──┬──┐ │ a│ b│ ├──┼──┤ └──┴──┘ ✓ ✗ ★ ☆ ♠ ♥ ♦ ♣
"""

_PYTHON = """\
import os
import sys
import json
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Optional


@dataclass(frozen=True)
class SamplingParams:
    temperature: float = 1.0
    top_p: float = 1.0
    top_k: int = -1
    max_tokens: int = 16
    stop: tuple[str, ...] = ()
    seed: Optional[int] = None


class BlockPool:
    def __init__(self, num_blocks: int, block_size: int) -> None:
        self.num_blocks = num_blocks
        self.block_size = block_size
        self.free_blocks = list(range(num_blocks))
        self.ref_counts = [0] * num_blocks

    def allocate(self, n: int) -> list[int]:
        if n > len(self.free_blocks):
            raise RuntimeError(f"out of blocks: need {n}, have {len(self.free_blocks)}")
        blocks, self.free_blocks = self.free_blocks[:n], self.free_blocks[n:]
        for block_id in blocks:
            self.ref_counts[block_id] += 1
        return blocks

    def free(self, blocks: list[int]) -> None:
        for block_id in reversed(blocks):
            self.ref_counts[block_id] -= 1
            assert self.ref_counts[block_id] >= 0, "negative ref count"
            if self.ref_counts[block_id] == 0:
                self.free_blocks.append(block_id)


def load_config(path: str | Path) -> dict[str, Any]:
    with open(path, encoding="utf-8") as f:
        return json.load(f)


def fibonacci(n: int) -> int:
    a, b = 0, 1
    for _ in range(n):
        a, b = b, a + b
    return a


def main(argv: list[str] | None = None) -> int:
    args = argv if argv is not None else sys.argv[1:]
    if not args:
        print("usage: tool <file>", file=sys.stderr)
        return 2
    start = time.perf_counter()
    config = load_config(args[0])
    for key, value in sorted(config.items()):
        print(f"{key} = {value!r}")
    elapsed = time.perf_counter() - start
    print(f"done in {elapsed:.3f}s")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

def test_allocate_and_free():
    pool = BlockPool(num_blocks=4, block_size=16)
    blocks = pool.allocate(3)
    assert blocks == [0, 1, 2]
    pool.free(blocks)
    assert pool.free_blocks == [3, 2, 1, 0]

try:
    value = int(os.environ.get("NUM_WORKERS", "4"))
except ValueError as exc:
    raise SystemExit(f"bad NUM_WORKERS: {exc}") from exc

squares = [x * x for x in range(10) if x % 2 == 0]
lookup = {name: index for index, name in enumerate(["alpha", "beta", "gamma"])}
with torch.no_grad():
    logits = model(input_ids=input_ids, attention_mask=attention_mask).logits[:, -1, :]
    next_token = torch.argmax(logits, dim=-1, keepdim=True)
async def fetch(client, url: str) -> str:
    response = await client.get(url, timeout=10.0)
    response.raise_for_status()
    return response.text
self.assertEqual(result, expected)
return {"id": request_id, "object": "chat.completion", "choices": choices, "usage": usage}
"""

_SHELL = """\
$ ls -la
total 48
drwxr-xr-x  7 user user 4096 Jan 15 12:30 .
drwxr-xr-x 12 user user 4096 Jan 15 12:01 ..
-rw-r--r--  1 user user  812 Jan 15 12:30 README.md
-rw-r--r--  1 user user 1534 Jan 15 12:29 pyproject.toml
drwxr-xr-x  4 user user 4096 Jan 15 12:30 src
drwxr-xr-x  2 user user 4096 Jan 15 12:30 tests
$ git status
On branch main
Changes not staged for commit:
  modified:   src/scheduler.py
$ git diff --stat
 src/scheduler.py | 14 ++++++++------
 1 file changed, 8 insertions(+), 6 deletions(-)
$ python -m pytest -x -q tests/test_scheduler.py
..........F
FAILED tests/test_scheduler.py::test_preemption_order - AssertionError: assert [3, 1] == [1, 3]
1 failed, 10 passed in 0.42s
$ grep -rn "def schedule" src/
src/scheduler.py:88:    def schedule(self) -> SchedulerOutput:
$ cat /etc/os-release | head -n 2
NAME="Ubuntu"
VERSION="22.04.4 LTS (Jammy Jellyfish)"
$ pip install -e ".[dev]"
Successfully installed agent-engine-0.1.0
$ export CUDA_VISIBLE_DEVICES=0 && nvidia-smi --query-gpu=name,memory.used --format=csv
$ find . -name "*.py" -newer setup.cfg | xargs wc -l | sort -n | tail -5
$ curl -s http://localhost:8000/v1/models | jq '.data[].id'
"agent-engine-default"
$ docker run --rm -it -v "$PWD":/app -w /app python:3.11 bash
$ make test 2>&1 | tee build.log
$ echo $? && du -sh ~/.cache && df -h /tmp
for f in *.log; do echo "== $f"; tail -n 3 "$f"; done
if [ -z "$HOME" ]; then echo "HOME is not set" >&2; exit 1; fi
sed -i 's/old_name/new_name/g' src/*.py
Traceback (most recent call last):
  File "/app/src/main.py", line 12, in <module>
    main()
  File "/app/src/main.py", line 8, in main
    raise ValueError("invalid literal for int() with base 10: 'abc'")
ValueError: invalid literal for int() with base 10: 'abc'
bash: foo: command not found
Permission denied (publickey).
error: failed to push some refs to 'origin'
"""

_AGENT = """\
<|im_start|>system
You are a helpful coding assistant. You can run shell commands with the bash tool.<|im_end|>
<|im_start|>user
The tests in tests/test_cache.py fail. Can you find out why and fix it?<|im_end|>
<|im_start|>assistant
I will start by running the failing tests to see the error.
<tool_call>
{"name": "bash", "arguments": {"command": "python -m pytest tests/test_cache.py -x -q"}}
</tool_call><|im_end|>
<|im_start|>tool
F.
FAILED tests/test_cache.py::test_evict_lru - assert 2 == 0
1 failed, 1 passed in 0.08s<|im_end|>
<|im_start|>assistant
The eviction picks the most recently used block. Let me look at the code.
<tool_call>
{"name": "read_file", "arguments": {"path": "src/cache.py", "start_line": 1, "end_line": 60}}
</tool_call><|im_end|>
<|im_start|>assistant
The free queue is appended at the head instead of the tail. I will fix that line.
<tool_call>
{"name": "edit_file", "arguments": {"path": "src/cache.py", "old": "queue.appendleft(block)", "new": "queue.append(block)"}}
</tool_call><|im_end|>
<|im_start|>assistant
All tests pass now. The bug was that freed blocks were put at the front of the LRU queue.<|im_end|>
<|im_start|>user
What's the weather like in Berlin today?<|im_end|>
<|im_start|>assistant
<tool_call>
{"name": "web_search", "arguments": {"query": "Berlin weather today"}}
</tool_call><|im_end|>
<|im_start|>tool
{"temperature_c": 18, "condition": "partly cloudy", "wind_kmh": 12}<|im_end|>
<|im_start|>assistant
It is 18 °C and partly cloudy in Berlin, with a light wind of 12 km/h.<|im_end|>
{"role": "user", "content": "List the files in the current directory."}
{"role": "assistant", "content": null, "tool_calls": [{"id": "call_1", "type": "function", "function": {"name": "bash", "arguments": "{\\"command\\": \\"ls\\"}"}}]}
{"role": "tool", "tool_call_id": "call_1", "content": "README.md\\nsetup.py\\nsrc\\ntests"}
{"model": "agent-engine-default", "messages": [], "max_tokens": 128, "temperature": 0.0, "stream": true}
{"id": "chatcmpl-123", "object": "chat.completion.chunk", "choices": [{"index": 0, "delta": {"content": "Hello"}, "finish_reason": null}]}
Thought: I need to know which version of the package is installed.
Action: bash
Action Input: pip show numpy | grep Version
Observation: Version: 1.26.4
Final Answer: numpy 1.26.4 is installed.
"""

_MARKUP = """\
# Agent Engine

A paged-KV serving engine for agent workloads.

## Quick start

```bash
agent-engine serve --port 8000
```

| metric | fcfs | continuum |
|--------|------|-----------|
| mean JCT (s) | 41.2 | 29.8 |
| p95 JCT (s) | 120.5 | 77.1 |

- [x] block pool
- [ ] paged attention on CUDA
<div class="note"><p>See <a href="https://example.com/docs">the docs</a> for details.</p></div>
SELECT id, name, created_at FROM users WHERE active = 1 ORDER BY created_at DESC LIMIT 10;
CREATE TABLE jobs (id INTEGER PRIMARY KEY, name TEXT NOT NULL, started REAL);
[server]
host = "0.0.0.0"
port = 8000
workers: 4
log_level: info
fn main() { let v: Vec<u32> = (0..10).collect(); println!("{:?}", v); }
function add(a, b) { return a + b; } const xs = [1, 2, 3].map((x) => x * 2);
#include <stdio.h>
int main(void) { printf("hello, world\\n"); return 0; }
"""

_WORDS = (
    "agent engine model token block cache request prompt output tool call turn job scheduler queue "
    "prefill decode batch kernel tensor memory latency throughput user assistant system answer question "
    "file line test error value config server client stream time step state result input list index key "
    "map count size length path name data report issue patch commit branch build run read write open "
    "close start stop load save parse check update delete insert create find sort merge split join "
    "first last next previous small large fast slow new old good bad simple complex random fixed "
    "the a an of to in on for with from by at as is are was were be been has have had do does did "
    "this that these those it its we you they he she our your their not no yes and or but if then "
    "because while when where which who what how why all some many few more most other each every"
).split()

_IDENT_PARTS = (
    "get set is has num max min total block token req seq kv cache pool hash id ids len buf tmp "
    "src dst out in pos rank world dim head layer attn mlp norm proj weight bias scale eps ttl pin"
).split()

_TEMPLATES = (
    "The {0} {1} the {2} before the {3} {4}.",
    "Why does the {0} {1} when the {2} is {3}?",
    "{0}_{1} = {2}_{3}({4}, {5}=True)",
    "def {0}_{1}(self, {2}: int) -> list[int]:",
    "if {0}.{1} > {2}: return {3}",
    '{{"{0}": {5}, "{1}": "{2}", "{3}": [{4}, {5}]}}',
    "$ {0} --{1} {2}/{3}.txt | grep -c {4}",
    "assert {0}_{1}[{4}] == {5}, \"{2} {3}\"",
    "# {0} {1}: {2} the {3} of the {4}",
    "{0}, {1} and {2} are {3}; the {4} is {5}.",
)


class _XorShift64:
    """A tiny deterministic PRNG (xorshift64*), independent of Python's ``random`` module."""

    def __init__(self, seed: int) -> None:
        self.state = (seed & 0xFFFFFFFFFFFFFFFF) or 1

    def next(self) -> int:
        x = self.state
        x ^= (x >> 12) & 0xFFFFFFFFFFFFFFFF
        x ^= (x << 25) & 0xFFFFFFFFFFFFFFFF
        x ^= (x >> 27) & 0xFFFFFFFFFFFFFFFF
        self.state = x
        return (x * 0x2545F4914F6CDD1D) & 0xFFFFFFFFFFFFFFFF

    def below(self, n: int) -> int:
        return self.next() % n


def _base_texts() -> list[str]:
    return [_ENGLISH, _MULTILINGUAL, _PYTHON, _SHELL, _AGENT, _MARKUP]


def _synthetic_lines(rng: _XorShift64, count: int) -> Iterator[str]:
    """Seeded recombination of the base vocabulary into sentences, code and shell-like lines."""
    base_lines = [ln for text in _base_texts() for ln in text.splitlines() if ln.strip()]
    for _ in range(count):
        kind = rng.below(4)
        if kind == 0:
            template = _TEMPLATES[rng.below(len(_TEMPLATES))]
            slots = []
            for i in range(6):
                if i == 5 and rng.below(2):
                    slots.append(str(rng.below(10_000)))
                elif rng.below(3) == 0:
                    slots.append(_IDENT_PARTS[rng.below(len(_IDENT_PARTS))])
                else:
                    slots.append(_WORDS[rng.below(len(_WORDS))])
            yield template.format(*slots)
        elif kind == 1:
            yield " ".join(_WORDS[rng.below(len(_WORDS))] for _ in range(4 + rng.below(12))).capitalize() + "."
        elif kind == 2:
            parts = [_IDENT_PARTS[rng.below(len(_IDENT_PARTS))] for _ in range(2 + rng.below(2))]
            camel = parts[0] + "".join(p.capitalize() for p in parts[1:])
            yield f"    {'_'.join(parts)} = self.{camel}({rng.below(512)}, {rng.below(97) / 8:.3f})"
        else:
            yield base_lines[rng.below(len(base_lines))]


def corpus_texts(num_synthetic: int = 6000) -> list[str]:
    """Return the training corpus: the hand-written base texts (several copies) plus synthetic lines.

    Deterministic: the same list, byte for byte, on every machine and Python version.
    """
    rng = _XorShift64(CORPUS_SEED)
    texts = _base_texts() * 3
    texts.extend(_synthetic_lines(rng, num_synthetic))
    return texts
