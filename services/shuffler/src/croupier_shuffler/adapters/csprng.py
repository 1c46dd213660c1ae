"""The shuffle's random numbers: the operating system's CSPRNG, read a block at a time.

`secrets.randbelow` reads os.urandom once per draw: a six-deck shoe's 311 draws were 311 system calls
(~0.9 ms of CPU a shoe, bench/PROFILE.md "shoecpu"). `UrandomBelow` draws the same kind of number from
bytes read `block_bytes` at a time: each draw takes the next 32-bit word and rejects the words at or
above the largest multiple of n below 2**32, so every value of 0..n-1 is exactly as likely (no modulo
bias), as secrets.randbelow's rejection sampling does with fewer bits.
"""

from __future__ import annotations

import os
import secrets
import struct
import threading
from collections.abc import Callable

WORD_BITS = 32
WORDS = 1 << WORD_BITS
# Enough for a 16-deck shoe's 831 draws and their rare rejections in one read.
DEFAULT_BLOCK_BYTES = 4_096


class UrandomBelow:
    """randbelow(n): a uniform integer in [0, n) from `random_bytes` (os.urandom). One buffer per thread
    (the use cases run in worker threads), dropped in a forked child so it never repeats its parent's."""

    def __init__(self, random_bytes: Callable[[int], bytes] = os.urandom, block_bytes: int = DEFAULT_BLOCK_BYTES) -> None:
        if block_bytes <= 0 or block_bytes % (WORD_BITS // 8):
            raise ValueError(f"block_bytes must be a positive multiple of {WORD_BITS // 8}, not {block_bytes}")
        self._random_bytes = random_bytes
        self._block_bytes = block_bytes
        self._words_of = struct.Struct(f"<{block_bytes * 8 // WORD_BITS}I").unpack  # little-endian 32-bit words
        self._local = threading.local()
        os.register_at_fork(after_in_child=self._forget)

    def __call__(self, n: int) -> int:
        if n <= 0:
            raise ValueError("randbelow(n) needs n > 0")
        if n > WORDS:
            return secrets.randbelow(n)  # more than a word's range: never a shoe's
        limit = WORDS - WORDS % n  # the largest multiple of n not above 2**32: words below it map evenly
        while True:
            word = self._next_word()
            if word < limit:
                return word % n

    def _next_word(self) -> int:
        local = self._local
        words: list[int] | None = getattr(local, "words", None)
        if not words:
            block = self._random_bytes(self._block_bytes)
            if len(block) != self._block_bytes:
                raise RuntimeError(f"the random source returned {len(block)} bytes, not {self._block_bytes}")
            words = list(reversed(self._words_of(block)))  # popped from the end: the block's words in order
            local.words = words
        return words.pop()

    def _forget(self) -> None:
        self._local = threading.local()
