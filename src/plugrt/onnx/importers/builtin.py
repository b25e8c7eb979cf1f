"""Imports every built-in importer module so their op types are registered."""
