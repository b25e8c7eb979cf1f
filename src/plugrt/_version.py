"""The package version, importable without the package root."""

__version__ = "0.1.0"
