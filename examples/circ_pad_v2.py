"""Compatibility re-export: the plugin lives in plugrt.examples.circ_pad_v2."""

from plugrt.examples.circ_pad_v2 import *  # noqa: F403
from plugrt.examples.circ_pad_v2 import register  # noqa: F401
