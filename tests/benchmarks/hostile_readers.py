"""A larger, seeded battery of hostile inputs for every reader, through the real command line: prints the
count of each outcome (exit status, traceback, hang) per reader and in all.

    python3 tests/benchmarks/hostile_readers.py [--seed 0] [--random 60] [--workers 4]

Every reader meets the fixed cases of ``tests/hostile/reader_matrix.CASES`` and ``--random`` randomised
mutations of its valid file (truncation at a random byte, random bytes spliced in, lines duplicated or
dropped, a random deep nesting or long number, a random NUL or invalid UTF-8 run, CRLF), drawn from ``--seed``.
Targets: 0 tracebacks, 0 hangs; the mutations may be valid, so any exit 0, 1 or 2 is a handled outcome."""

from __future__ import annotations

import argparse
import random
import sys
import tempfile
from collections import Counter
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from tests.hostile.reader_matrix import CASES, READERS, Outcome, Reader, prepare, run


def _mutation(rng: random.Random, reader: Reader) -> tuple[str, bytes]:
    data = reader.valid().encode()
    kind = rng.choice(["truncate", "splice", "duplicate", "drop", "deep", "digits", "nul", "utf8", "crlf"])
    if kind == "truncate":
        return kind, data[: rng.randrange(len(data) + 1)]
    if kind == "splice":
        at = rng.randrange(len(data) + 1)
        return kind, data[:at] + bytes(rng.randrange(256) for _ in range(rng.randrange(1, 64))) + data[at:]
    lines = data.split(b"\n")
    if kind == "duplicate":
        k = rng.randrange(len(lines))
        return kind, b"\n".join(lines[: k + 1] + [lines[k]] * rng.randrange(1, 2000) + lines[k + 1 :])
    if kind == "drop":
        k = rng.randrange(len(lines))
        return kind, b"\n".join(lines[:k] + lines[k + 1 :])
    at = rng.randrange(len(data) + 1)
    if kind == "deep":
        depth = rng.choice([40, 500, 5000, 50_000])
        return kind, data[:at] + b"[" * depth + b"]" * depth + data[at:]
    if kind == "digits":
        return kind, data[:at] + b"9" * rng.choice([41, 400, 4301, 20_000]) + data[at:]
    if kind == "nul":
        return kind, data[:at] + b"\0" * rng.randrange(1, 100) + data[at:]
    if kind == "utf8":
        return kind, data[:at] + rng.choice([b"\xff", b"\xc0\xaf", b"\xed\xa0\x80", b"\xf8\x88\x80\x80\x80"]) + data[
            at:
        ]
    return kind, data.replace(b"\n", b"\r\n")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--random", type=int, default=60, help="random mutations per reader")
    parser.add_argument("--workers", type=int, default=4)
    args = parser.parse_args()
    rng = random.Random(args.seed)
    jobs: list[tuple[Reader, str, bytes | None]] = [(r, case, None) for r in READERS for case in CASES]
    for reader in READERS:
        for _ in range(args.random):
            kind, data = _mutation(rng, reader)
            jobs.append((reader, f"random:{kind}", data))
    with tempfile.TemporaryDirectory(prefix="hostile-readers-") as tmp:
        root = Path(tmp)

        def one(index: int) -> Outcome | None:
            reader, case, data = jobs[index]
            directory = root / f"{index:05d}"
            if data is None:
                path = prepare(reader, case, directory)
                if path is None:
                    return None
                return run(reader, case, path, directory)
            directory.mkdir(parents=True)
            path = directory / f"input{reader.suffix}"
            path.write_bytes(data)
            outcome = run(reader, "crlf", path, directory)  # "crlf": any handled exit status is correct
            return Outcome(**{**{f: getattr(outcome, f) for f in Outcome.__slots__}, "case": case})

        with ThreadPoolExecutor(max_workers=args.workers) as pool:
            outcomes = [o for o in pool.map(one, range(len(jobs))) if o is not None]
    per_reader: dict[str, Counter[str]] = {}
    for outcome in outcomes:
        per_reader.setdefault(outcome.reader, Counter())[outcome.kind] += 1
    kinds = sorted({o.kind for o in outcomes})
    print(f"seed {args.seed}: {len(outcomes)} runs ({len(jobs) - len(outcomes)} cases not makeable here)")
    print(f"{'reader':<12} " + " ".join(f"{k:>10}" for k in kinds) + f" {'wrong':>6}")
    for name, counts in per_reader.items():
        wrong = sum(1 for o in outcomes if o.reader == name and not o.ok)
        print(f"{name:<12} " + " ".join(f"{counts[k]:>10}" for k in kinds) + f" {wrong:>6}")
    total = Counter(o.kind for o in outcomes)
    print(f"{'all':<12} " + " ".join(f"{total[k]:>10}" for k in kinds) + f" {sum(not o.ok for o in outcomes):>6}")
    for outcome in outcomes:
        if not outcome.ok:
            last = outcome.stderr.strip().splitlines()[-1:] or [""]
            print(f"  {outcome.reader} {outcome.case}: {outcome.kind} (expected {outcome.expect}): {last[0][:160]}")
    slow = max(outcomes, key=lambda o: o.wall_s)
    print(f"slowest run: {slow.reader} {slow.case} {slow.wall_s:.1f} s")


if __name__ == "__main__":
    main()
