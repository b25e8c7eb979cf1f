"""Backends: where arenas live and which array module kernels use."""
