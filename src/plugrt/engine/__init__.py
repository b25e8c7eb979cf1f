"""Engines: building, serializing and running compiled networks."""
