"""One router per resource: lowerings (jobs), kernels, verify, ops (health and metrics)."""
