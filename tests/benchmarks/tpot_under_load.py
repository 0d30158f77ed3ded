"""Print the TPOT law against the simulator on the paper scenarios (``tests/validation/tpot_law.py`` says
what is compared). Figures only.

    python3 -m tests.benchmarks.tpot_under_load --requests 20000 --seeds 3
"""

from __future__ import annotations

import argparse

from tests.validation.tpot_law import compare, format_table


def main() -> None:
    """Both feeds on both paper scenarios (measured: a flat step; roofline: the physics step per batch)."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--requests", type=int, default=20_000)
    parser.add_argument("--seeds", type=int, default=3)
    options = parser.parse_args()
    for scenario in ("paper-case-study.yaml", "paper-case-study-roofline.yaml"):
        rows = [
            row
            for feed in ("decode", "plan")
            for row in compare(scenario, feed, requests=options.requests, seeds=options.seeds)
        ]
        print(f"{scenario}: {options.seeds} seeds x {options.requests:,} requests (first 10 % dropped)")
        print(format_table(rows))
        print()


if __name__ == "__main__":
    main()
