"""SHA-256 chained block hashes: deterministic across processes, chained, salted."""

from __future__ import annotations

import hashlib
import subprocess
import sys
from array import array

import pytest

from scheduler.block_hash import _ROOT, hash_block_tokens

pytestmark = pytest.mark.core


def test_the_hash_is_sha256_over_parent_tokens_and_salt():
    tokens = [1, 2, 3, 4]
    expected = int.from_bytes(hashlib.sha256(_ROOT + array("q", tokens).tobytes()).digest(), "little")
    assert hash_block_tokens(None, tokens) == expected
    assert expected.bit_length() > 64  # a 256-bit digest, not a 64-bit ``hash()``


def test_deterministic_across_processes():
    code = "from scheduler.block_hash import hash_block_tokens as h; print(h(h(None, [5, 6], ('s',)), [7, 8]))"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert int(out) == hash_block_tokens(hash_block_tokens(None, [5, 6], ("s",)), [7, 8])


def test_chain_salt_and_tokens_all_matter():
    a = hash_block_tokens(None, [1, 2, 3, 4])
    assert hash_block_tokens(None, [1, 2, 3, 5]) != a
    assert hash_block_tokens(None, [1, 2, 3, 4], ("tenant-a",)) != hash_block_tokens(None, [1, 2, 3, 4], ("tenant-b",))
    assert hash_block_tokens(None, [1, 2, 3, 4], ("tenant-a",)) != a
    assert hash_block_tokens(a, [9, 9]) != hash_block_tokens(hash_block_tokens(None, [0, 0, 0, 0]), [9, 9])
    # No ambiguity between token boundaries: [1, 23] and [12, 3] are different blocks.
    assert hash_block_tokens(None, [1, 23]) != hash_block_tokens(None, [12, 3])
