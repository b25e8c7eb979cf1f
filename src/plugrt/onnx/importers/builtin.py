"""Imports every built-in importer module so their op types are registered."""

from . import basic, cnn, recurrent, tensor  # noqa: F401  (imported for registration)
