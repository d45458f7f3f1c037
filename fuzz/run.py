"""Coverage-guided fuzzing of one input surface with atheris (libFuzzer), for a bounded time.

    .venv/bin/python fuzz/run.py SURFACE SECONDS      # make fuzz: every surface, FUZZ_SECONDS each

Every input either succeeds or raises a TidlxError; any other exception is a finding: it is
counted, its input saved under fuzz/findings/<surface>/<sha1>.bin with the traceback beside it,
and the run goes on. The counts are written to fuzz/findings/<surface>/stats.json as it runs
(libFuzzer ends the process without Python's atexit) and printed by fuzz/report.py.
"""

from __future__ import annotations

import hashlib
import json
import os
import sys
import time
import traceback

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.dirname(HERE))


def main() -> None:
    import atheris

    with atheris.instrument_imports(include=["tidlx"]):
        from fuzz.surfaces import SURFACES, check, seeds

    surface, seconds = sys.argv[1], int(sys.argv[2])
    if surface not in SURFACES:
        sys.exit(f"unknown surface {surface!r} (one of {', '.join(SURFACES)})")
    out = os.path.join(HERE, "findings", surface)
    corpus = os.path.join(HERE, "corpus", surface)
    os.makedirs(out, exist_ok=True)
    os.makedirs(corpus, exist_ok=True)
    for i, seed in enumerate(seeds(surface)):
        with open(os.path.join(corpus, f"seed{i}"), "wb") as f:
            f.write(seed)
    stats = {"surface": surface, "seconds": seconds, "inputs": 0, "failures": 0, "distinct": {}, "started": time.time()}

    def save():
        stats["elapsed"] = round(time.time() - stats["started"], 1)
        with open(os.path.join(out, "stats.json"), "w") as f:
            json.dump(stats, f, indent=1, sort_keys=True)

    def one(data: bytes) -> None:
        stats["inputs"] += 1
        exc = check(surface, data)
        if exc is not None:
            stats["failures"] += 1
            tb = traceback.extract_tb(exc.__traceback__)
            where = f"{tb[-1].filename}:{tb[-1].lineno}" if tb else "?"
            key = f"{type(exc).__name__} at {os.path.relpath(where, os.path.dirname(HERE))}"
            if key not in stats["distinct"]:
                name = hashlib.sha1(data).hexdigest()
                with open(os.path.join(out, name + ".bin"), "wb") as f:
                    f.write(data)
                with open(os.path.join(out, name + ".txt"), "w") as f:
                    f.write("".join(traceback.format_exception(exc)))
                stats["distinct"][key] = name
            save()
        elif stats["inputs"] % 200 == 0:
            save()

    save()
    atheris.Setup([sys.argv[0], corpus, f"-max_total_time={seconds}", "-rss_limit_mb=4096", "-timeout=30",
                   "-print_final_stats=0"], one)
    atheris.Fuzz()


if __name__ == "__main__":
    main()
