"""Benchmarks: msgclient against the official clients, side by side in one run.

``python -m msgclient.perf --help``. Not timed tests: the numbers are for reading.
"""
