"""Writes outputs only: Markdown, CSV, JSON, PNG figures and simulation records, atomically and under a lock."""
