"""Typer commands (thin) and rich rendering."""
