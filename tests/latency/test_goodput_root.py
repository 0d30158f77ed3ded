"""The full-law goodput of ``plans_goodput``: the root of P_q(Λ) = X, searched from the mean-stretch estimate."""

from __future__ import annotations

from collections.abc import Callable

import pytest

import prfaas_plan.latency.distribution as distribution
from prfaas_plan.latency import loaded_ttft
from prfaas_plan.latency.goodput import plans_goodput
from prfaas_plan.spec.plan import Plan, TtftSlo
from prfaas_plan.spec.scenario import Scenario
from prfaas_plan.throughput import StageModel

# The three plans of the paper's goodput comparison at a 5 s P90 SLO (optimize --objective goodput): the
# goodput-optimal one, the throughput-optimal one (its P90 sits on a plateau of the law near the root, where
# the search once took 37 evaluations) and the naive one (t = 0).
PLANS = ((21_746.72024798338, 4), (19_418.007534142675, 3), (0.0, 0))


def test_full_law_goodput_meets_the_slo_in_few_evaluations(
    paper_model: StageModel, paper_scenario: Scenario, monkeypatch: pytest.MonkeyPatch
) -> None:
    """At the returned rate the P90 (as loaded_ttft reports it) is at most X and within 1e-9 X of it, and 1e-6
    higher up it exceeds X; each plan's search evaluates the law at most 12 times (56 in all before the search
    started from the estimate: a guard on speed, not on the answer)."""
    slo = 5.0
    scv = paper_scenario.traffic.output_length.scv
    counts: list[int] = []
    original = distribution.ttft_quantile_at_rates

    def counted(*args: object, **kwargs: object) -> Callable[[float], float | None]:
        quantile_at = original(*args, **kwargs)  # type: ignore[arg-type]
        counts.append(0)

        def wrapped(rate: float) -> float | None:
            counts[-1] += 1
            return quantile_at(rate)

        return wrapped

    monkeypatch.setattr(distribution, "ttft_quantile_at_rates", counted)
    scored = plans_goodput(
        paper_model, [t for t, _ in PLANS], [n_p for _, n_p in PLANS], TtftSlo(limit_s=slo), decode_service_scv=scv
    )
    assert len(counts) == len(PLANS) and max(counts) <= 12, counts
    for (t, n_p), goodput in zip(PLANS, scored, strict=True):
        assert goodput.limited_by == "slo"
        plan = Plan(threshold_tokens=t, n_pd_prefill=n_p, n_pd_decode=paper_model.n_local - n_p)
        at = loaded_ttft(paper_model, plan, goodput.rate_req_per_s, decode_service_scv=scv).ttft
        above = loaded_ttft(paper_model, plan, goodput.rate_req_per_s * (1 + 1e-6), decode_service_scv=scv)
        assert at is not None and slo * (1 - 1e-9) <= at.p90_s <= slo
        assert above.ttft is not None and above.ttft.p90_s > slo
