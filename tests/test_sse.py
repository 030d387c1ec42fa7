"""Every server-sent event stays one line for line readers that split like ``str.splitlines``."""

from __future__ import annotations

import json

import pytest
from httpx._decoders import LineDecoder

from agent_engine.server.anthropic.streaming import sse_event
from agent_engine.server.openai_call import sse

pytestmark = pytest.mark.core

TEXT = "a\u2028b\u2029c\x85d\re\nf\x1cg\x0bh \u00e9\u4e2d\U0001f600"  # every splitlines break, and non-Latin text


@pytest.mark.parametrize("encode", [lambda d: sse(d), lambda d: sse_event("content_block_delta", d)])
def test_events_survive_splitlines_readers(encode) -> None:
    """httpx's ``aiter_lines`` (used by clients built on httpx) cuts lines at U+2028, U+2029, U+0085 and
    the C0 separators: each event's data is still one line there and parses back to the same text,
    with non-Latin characters kept as UTF-8 rather than escapes."""
    wire = encode({"choices": [{"text": TEXT}]})
    lines = [line for line in LineDecoder().decode(wire) if line.startswith("data: ")]
    assert len(lines) == 1
    assert json.loads(lines[0][6:])["choices"][0]["text"] == TEXT
    assert "\u00e9\u4e2d\U0001f600" in wire
