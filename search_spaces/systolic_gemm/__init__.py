"""TPU-like systolic arrays: dataflow, tiling, buffering and hardware co-design of GEMMs."""
