"""Benchmarks, each run as a module: ``python -m bench.<name>``.

What each measures, how to run it and the figures: docs/benchmarks.md.
"""
