"""Workflows that combine the layers: plan, simulate, compare, verify, review, sweep, matrix."""
