"""Imports every built-in operator module so their kinds are registered."""
