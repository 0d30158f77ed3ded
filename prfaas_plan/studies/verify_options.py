"""How hard a check of the closed form by simulation works (``studies.verify``): the options and their budget,
apart from the checks themselves so that a command builds them without loading the simulator's side."""

from __future__ import annotations

from prfaas_plan._frozen import frozen

#: Replications (the first batch, before the sequential ones) and requests per replication (CLI defaults).
REPLICATIONS = 3
REQUESTS = 20_000
#: Budget of one sequential check: simulated requests in all (every plan, every replication), wall seconds,
#: and replications per plan.
MAX_REQUESTS = 1_000_000
MAX_WALL_S = 60.0
MAX_REPLICATIONS = 200
#: Relative difference between closed form and simulation above which a percentile is flagged.
TOLERANCE = 0.2


@frozen
class VerifyOptions:
    """How hard to check: ``verify`` False keeps the closed form alone; otherwise at least ``replications`` of
    ``requests`` requests each (a trace is replayed whole), seeds from ``seed``, and with an SLO more, one at
    a time, until the check decides or the budget ends (``max_requests`` simulated requests in all,
    ``max_wall_s`` seconds, ``max_replications`` per plan)."""

    verify: bool = True
    replications: int = REPLICATIONS
    requests: int = REQUESTS
    seed: int = 0
    tolerance: float = TOLERANCE
    max_requests: int = MAX_REQUESTS
    max_wall_s: float = MAX_WALL_S
    max_replications: int = MAX_REPLICATIONS

    def budget_line(self) -> str:
        """The budget in words."""
        return (
            f"at least {self.replications} replications of {self.requests:,} requests, then one at a time until "
            f"decided or {self.max_requests:,} requests / {self.max_wall_s:g} s / {self.max_replications} "
            "replications"
        )
