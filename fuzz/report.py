"""Prints the counts of the last ``make fuzz``: per surface, inputs tried, failures (exceptions that
are not TidlxError) and the distinct ones with their saved input."""

import json
import os
import sys

HERE = os.path.dirname(os.path.abspath(__file__))


def main() -> int:
    root = os.path.join(HERE, "findings")
    total = 0
    print(f"{'surface':<12}{'seconds':>8}{'inputs':>9}{'non-tidlx exceptions':>22}")
    for surface in sorted(os.listdir(root)) if os.path.isdir(root) else []:
        path = os.path.join(root, surface, "stats.json")
        if not os.path.exists(path):
            continue
        with open(path) as f:
            s = json.load(f)
        total += s["failures"]
        print(f"{surface:<12}{s.get('elapsed', 0):>8.0f}{s['inputs']:>9}{s['failures']:>22}")
        for key, name in s["distinct"].items():
            print(f"    {key}  (fuzz/findings/{surface}/{name}.bin)")
    return 1 if total else 0


if __name__ == "__main__":
    sys.exit(main())
