"""Reads inputs only: YAML scenarios, topologies, hardware and engine profiles, model cards, traces, Hugging Face
configs, benchmark result files and sweep grids, each through ``io.guard`` (regular files, bounded) and parsed in two
stages into frozen specs, with every problem named by file, line and field. Nothing here writes a file."""
