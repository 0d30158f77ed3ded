"""Pure functions over specs: fitted profile curves, decode capacity."""
