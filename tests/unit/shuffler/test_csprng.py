"""The shuffle's random numbers: uniform draws from the OS CSPRNG, a block of bytes read at a time."""

import os
import struct
import threading
from collections import Counter

import pytest

from croupier_rules.cards import fresh_shoe
from croupier_shuffler.adapters.csprng import WORDS, UrandomBelow
from croupier_shuffler.domain.shoe import fisher_yates


class CountingBytes:
    """os.urandom, counting the reads."""

    def __init__(self) -> None:
        self.reads = 0

    def __call__(self, n: int) -> bytes:
        self.reads += 1
        return os.urandom(n)


def scripted_words(*words: int):
    """A byte source that returns blocks of the given 32-bit words (little-endian), in turn."""
    blocks = [struct.pack(f"<{len(block)}I", *block) for block in words]

    def random_bytes(n: int) -> bytes:
        block = blocks.pop(0)
        assert len(block) == n
        return block

    return random_bytes


def test_a_six_deck_shoe_is_one_read_of_the_os_csprng_not_one_a_draw():
    source = CountingBytes()
    randbelow = UrandomBelow(source)
    shuffled = fisher_yates(fresh_shoe(6), randbelow)
    assert sorted(shuffled) == sorted(fresh_shoe(6))
    assert source.reads == 1  # secrets.randbelow: 311 reads


def test_draws_take_the_block_in_order_and_reduce_mod_n():
    randbelow = UrandomBelow(scripted_words((7, 12, 5, 0)), block_bytes=16)
    assert [randbelow(5), randbelow(5), randbelow(3), randbelow(1)] == [2, 2, 2, 0]


def test_a_word_at_or_above_the_largest_multiple_of_n_is_rejected_so_there_is_no_modulo_bias():
    # 2**32 = 3 * 1431655765 + 1: the word 2**32 - 1 would make 0 likelier than 1 and 2; it is skipped.
    randbelow = UrandomBelow(scripted_words((WORDS - 1, WORDS - 2), (4, 4)), block_bytes=8)
    assert randbelow(3) == (WORDS - 2) % 3
    # A power of two divides 2**32: nothing is rejected, even the top word.
    randbelow = UrandomBelow(scripted_words((WORDS - 1, 0)), block_bytes=8)
    assert randbelow(4) == 3


def test_an_exhausted_block_is_followed_by_a_fresh_read():
    source = CountingBytes()
    randbelow = UrandomBelow(source, block_bytes=8)
    for _ in range(5):
        randbelow(10)
    assert source.reads == 3


def test_each_value_comes_up_about_as_often():
    randbelow = UrandomBelow()
    counts = Counter(randbelow(6) for _ in range(60_000))
    assert set(counts) == set(range(6))
    assert all(9_000 < count < 11_000 for count in counts.values())  # ~10,000 each; 10 sigma is ~950


def test_threads_do_not_share_a_buffer():
    reads_by_thread = Counter()

    def random_bytes(n: int) -> bytes:
        reads_by_thread[threading.current_thread().name] += 1
        return os.urandom(n)

    randbelow = UrandomBelow(random_bytes)
    all_drawn = threading.Barrier(3)  # all alive at once: none takes over a finished one's thread

    def draw() -> None:
        for _ in range(10):
            randbelow(52)
        all_drawn.wait()

    threads = [threading.Thread(target=draw, name=f"draw-{i}") for i in range(3)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert sorted(reads_by_thread.values()) == [1, 1, 1]


@pytest.mark.skipif(not hasattr(os, "fork"), reason="needs fork")
def test_a_forked_child_does_not_reuse_the_parents_buffered_bytes():
    randbelow = UrandomBelow()
    randbelow(WORDS)  # the parent's buffer filled
    read, write = os.pipe()
    pid = os.fork()
    if pid == 0:  # the child: its first words, sent to the parent
        os.close(read)
        os.write(write, struct.pack("<8I", *(randbelow(WORDS) for _ in range(8))))
        os._exit(0)
    os.close(write)
    child = struct.unpack("<8I", os.read(read, 32))
    os.close(read)
    os.waitpid(pid, 0)
    parent = tuple(randbelow(WORDS) for _ in range(8))
    assert child != parent


@pytest.mark.parametrize("n", [0, -1])
def test_n_must_be_positive(n):
    with pytest.raises(ValueError):
        UrandomBelow()(n)


def test_a_block_must_hold_whole_words():
    with pytest.raises(ValueError):
        UrandomBelow(block_bytes=10)
