"""Shoes for the randomness report: the shuffler's Fisher–Yates, many shoes at once.

The production shuffle (croupier_shuffler.domain.shoe.fisher_yates with adapters.csprng.UrandomBelow) takes
32-bit little-endian words in order, rejects a word at or above the largest multiple of n under 2**32 and
keeps ``word % n``; for i = size-1 down to 1 it swaps position i with position randbelow(i + 1). This module
does exactly that for a batch of shoes in numpy (one column step at a time across the batch), so 10⁶ shoes
take seconds instead of an hour. With no rejection the words are consumed in the same order as the
shuffler's, shoe after shoe: ``matches_the_shuffler`` checks the two give the same shoes for the same bytes.

Bytes come from a *sample seed*: 32 bytes drawn from the OS CSPRNG (os.urandom) unless given, stretched by
ChaCha20 (the construction the Linux kernel's own CSPRNG uses). The seed is printed in the report, so a lab
re-running with it gets the same shoes bit for bit; ``--source urandom`` reads os.urandom directly instead
(the production bytes, not repeatable by design).
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterator

import numpy as np

WORD_RANGE = 1 << 32
DECK_SIZE = 52

ByteSource = Callable[[int], bytes]


def chacha20_stream(seed: bytes) -> ByteSource:
    """A byte source: the ChaCha20 keystream of a 32-byte seed, read on in order."""
    from cryptography.hazmat.primitives.ciphers import Cipher, algorithms

    if len(seed) != 32:
        raise ValueError(f"a sample seed is 32 bytes, not {len(seed)}")
    encryptor = Cipher(algorithms.ChaCha20(seed, b"\0" * 16), mode=None).encryptor()
    return lambda n: encryptor.update(bytes(n))


def byte_source(seed: bytes | None) -> ByteSource:
    """ChaCha20 of ``seed``, or the OS CSPRNG itself when the seed is None."""
    return os.urandom if seed is None else chacha20_stream(seed)


class WordStream:
    """32-bit little-endian words from a byte source, in order, as the shuffler's UrandomBelow reads them."""

    def __init__(self, source: ByteSource) -> None:
        self._source = source
        self._pending = np.empty(0, dtype=np.uint32)

    def take(self, count: int) -> np.ndarray:
        if len(self._pending) < count:
            need = count - len(self._pending)
            fresh = np.frombuffer(self._source(4 * need), dtype="<u4").astype(np.uint32)
            self._pending = np.concatenate([self._pending, fresh])
        words, self._pending = self._pending[:count], self._pending[count:]
        return words


def shuffle_batch(words: WordStream, shoes: int, decks: int) -> np.ndarray:
    """``shoes`` shuffled shoes of ``decks`` decks: rows of card indexes 0..size-1 (face = index % 52)."""
    size = DECK_SIZE * decks
    drawn = words.take(shoes * (size - 1)).reshape(shoes, size - 1)
    cards = np.tile(np.arange(size, dtype=np.int16), (shoes, 1))
    rows = np.arange(shoes)
    for step, i in enumerate(range(size - 1, 0, -1)):
        column = drawn[:, step]
        limit = WORD_RANGE - WORD_RANGE % (i + 1)
        rejected = np.flatnonzero(column >= limit)
        while len(rejected):  # ~1 draw in 10⁷: redraw those alone (the shuffler redraws the next word)
            column = column.copy()
            column[rejected] = words.take(len(rejected))
            rejected = rejected[column[rejected] >= limit]
        j = (column % (i + 1)).astype(np.intp)
        held = cards[rows, j]
        cards[rows, j] = cards[:, i]
        cards[:, i] = held
    return cards


def shoe_batches(source: ByteSource, shoes: int, decks: int, batch: int = 10_000) -> Iterator[np.ndarray]:
    words = WordStream(source)
    done = 0
    while done < shoes:
        count = min(batch, shoes - done)
        yield shuffle_batch(words, count, decks)
        done += count


def matches_the_shuffler(seed: bytes, shoes: int, decks: int) -> bool:
    """The production Fisher–Yates and UrandomBelow, fed the same bytes, give the same shoes as the batch."""
    from croupier_shuffler.adapters.csprng import UrandomBelow
    from croupier_shuffler.domain.shoe import fisher_yates

    size = DECK_SIZE * decks
    batch = shuffle_batch(WordStream(chacha20_stream(seed)), shoes, decks)
    randbelow = UrandomBelow(random_bytes=chacha20_stream(seed), block_bytes=4 * (size - 1))
    production = np.array([fisher_yates(range(size), randbelow) for _ in range(shoes)], dtype=np.int16)
    return bool(np.array_equal(batch, production))
