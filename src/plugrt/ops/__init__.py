"""Operators: shape rules, type rules and NumPy kernels of the standard layers."""
