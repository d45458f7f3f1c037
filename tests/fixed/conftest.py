"""Prints how many hypothesis cases tests/fixed compared with the oracle, in the normal pytest output."""

from fixed_cases import CASES


def pytest_terminal_summary(terminalreporter):
    if not CASES:
        return
    failed = [r for r in terminalreporter.stats.get("failed", []) if "tests/fixed/" in r.nodeid]
    verdict = f"{len(failed)} test(s) FAILED" if failed else "all bit-exact"
    rules = ", ".join(f"{rule} {n}" for rule, n in sorted(CASES.items()))
    terminalreporter.write_sep("-", f"fixed-point oracle: {sum(CASES.values())} hypothesis cases compared, {verdict}")
    terminalreporter.write_line(f"cases by rule: {rules}")
