"""Frozen dataclasses describing what a model, an accelerator, a pool, a link, a workload and a scenario are."""
