"""``python -m prfaas_plan`` runs the command line."""

from prfaas_plan.cli.app import main

main()
