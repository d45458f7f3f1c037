"""Counts the random cases compared with the oracle, by rule; conftest.py prints the totals."""

from collections import Counter

CASES: Counter = Counter()


def count(rule: str) -> None:
    CASES[rule] += 1
