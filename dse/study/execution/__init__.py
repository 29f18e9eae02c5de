"""How a study runs: the port its strategies use, the Ray pool and cluster start, the
recorder of trial windows, progress bars and the reaper of stale leases."""
