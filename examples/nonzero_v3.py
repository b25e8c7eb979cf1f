"""Compatibility re-export: the plugin lives in plugrt.examples.nonzero_v3."""

from plugrt.examples.nonzero_v3 import *  # noqa: F403
from plugrt.examples.nonzero_v3 import register  # noqa: F401
