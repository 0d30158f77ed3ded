"""A run's dynamics as JSON-ready data: request accounting, scheduler moves, cache hit rates and cache
transfer bytes (NaN rates as None)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from prfaas_plan.report.jsonsafe import finite

if TYPE_CHECKING:  # annotations only: the simulator loads when a command simulates (start-up time)
    from prfaas_plan.sim.prefix_cache import CacheReplay
    from prfaas_plan.sim.records import SimResult


def dynamics_to_dict(result: SimResult, replay: CacheReplay | None) -> dict[str, Any]:
    """The run's dynamics figures as JSON-ready data: request accounting, scheduler moves, cache hit rates
    (NaN rates as None) and cross-cluster cache transfer bytes."""
    out: dict[str, Any] = {
        "accounting": {
            "arrived": result.arrived,
            "completed": result.completed,
            "in_flight": result.in_flight,
            "dropped": result.dropped,
            "restarted_prefills": result.restarted_prefills,
            "resumed_decodes": result.resumed_decodes,
            "rerouted": result.rerouted,
        },
        "cache_moved_bytes": result.cache_moved_bytes,
        "scheduler": {
            "threshold_changes": len(result.threshold_changes),
            "final_threshold_tokens": result.threshold_changes[-1][1] if result.threshold_changes else None,
            "role_changes": max(len(result.role_changes) - 1, 0),
            "roles": [list(change) for change in result.role_changes],
        },
    }
    if replay is not None:
        out.update(replay_to_dict(replay))
    return out


def replay_to_dict(replay: CacheReplay) -> dict[str, Any]:
    """A cache replay's hit rates per cluster and cross-cluster transfer bytes (NaN rates as None)."""
    return {
        "cache_hit_rates": {
            name: {
                "requests": rates.requests,
                "token_hit_rate": finite(rates.token_hit_rate),
                "request_hit_rate": finite(rates.request_hit_rate),
            }
            for name, rates in replay.hit_rates().items()
        },
        "cache_transfer_bytes": replay.transfer_bytes_total,
    }
