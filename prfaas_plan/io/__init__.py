"""The one place that reads YAML, JSON, CSV and JSONL, and writes reports."""
