"""Compatibility re-export: the plugin lives in plugrt.examples.circ_pad_v3."""

from plugrt.examples.circ_pad_v3 import *  # noqa: F403
from plugrt.examples.circ_pad_v3 import register  # noqa: F401
