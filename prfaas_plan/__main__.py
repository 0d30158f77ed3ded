"""``python -m prfaas_plan`` runs the command line."""

from prfaas_plan.cli.entry import main

main()
