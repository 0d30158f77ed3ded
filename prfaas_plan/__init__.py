"""prfaas-plan: capacity planning for Prefill-as-a-Service with PD disaggregation."""

__version__ = "0.1.0"
