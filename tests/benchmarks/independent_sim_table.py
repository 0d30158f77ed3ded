"""Print the table of our simulator against ciw (M/G/4 prefill pool, M/G/1-PS link) with more replications
than the validation test (``tests/validation/independent_sim.py`` says what is compared). Figures only.

    python3 -m tests.benchmarks.independent_sim_table --replications 20 --customers 20000
"""

from __future__ import annotations

import argparse

from tests.validation.independent_sim import compare, format_table


def main() -> None:
    """Run both cases and print the table."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--replications", type=int, default=20)
    parser.add_argument("--customers", type=int, default=20_000)
    parser.add_argument("--seed", type=int, default=21)
    options = parser.parse_args()
    rows = compare(options.replications, options.customers, options.seed)
    print(f"{options.replications} replications of {options.customers:,} requests each side (first 10 % dropped)")
    print("mean over replications ± 95 % half-width (s); gap/se: (ours - ciw) / standard error of the difference")
    print(format_table(rows))


if __name__ == "__main__":
    main()
