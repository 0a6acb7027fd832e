"""Benchmarks of placement, discovery and link health on fabrics alone."""
