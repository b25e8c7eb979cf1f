"""The ``plugrt`` command line."""
