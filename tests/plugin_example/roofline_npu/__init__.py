"""A dse target family outside dse: a roofline-only accelerator (one compute peak, one on-chip
SRAM, one DRAM bandwidth) whose GEMM mapping has two tile sizes."""
