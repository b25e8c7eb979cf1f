"""Example plugins written against TensorRT's Python API, shipped so the demo and docs can run them.

Each module registers its creator with the global registry when imported.
"""
