"""Sizes in words a person reads, and a size beside the limit it passed told apart."""

from __future__ import annotations

import pytest

from core.sizes import size_and_limit_words, size_words


@pytest.mark.parametrize(
    ("size", "words"),
    [
        (0, "0 bytes"),
        (1, "1 byte"),
        (512, "512 bytes"),
        (1023, "1,023 bytes"),
        (1024, "1 KB"),
        (2150, "2.1 KB"),
        (10 * 1024 * 1024, "10 MB"),
        (31_457_280, "30 MB"),
        (1_572_864, "1.5 MB"),
        (3 * 1024**3, "3 GB"),
    ],
)
def test_a_size_reads_in_the_largest_unit_it_reaches(size, words):
    assert size_words(size) == words


def test_a_size_over_its_limit_reads_as_two_round_numbers():
    assert size_and_limit_words(31_457_280, 10_485_760) == ("30 MB", "10 MB")


def test_a_size_one_byte_over_its_limit_adds_the_exact_counts_that_tell_them_apart():
    assert size_and_limit_words(10_485_761, 10_485_760) == (
        "10 MB (10,485,761 bytes)",
        "10 MB (10,485,760 bytes)",
    )
