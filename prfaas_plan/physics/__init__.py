"""Pure functions over specs: per-op FLOPs and bytes, memory, the roofline with an engine's terms (request, chunk
and step costs, collectives), measured profile curves, decode capacity, instance shapes and TCP throughput."""
