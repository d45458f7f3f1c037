"""The hypothesis cases tests/fixed compares with the oracle are counted in ``fixed_cases.CASES``;
tests/conftest.py prints the totals (merged from the workers when the suite runs in parallel)."""
