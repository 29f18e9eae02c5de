"""What a study file is read into: the YAML reader, workload lists and mixes, and the
resolution of its names (target, spaces, evaluators) built once."""
