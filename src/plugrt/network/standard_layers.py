"""Standard layers (identity, elementwise, activation, ...) of ``INetworkDefinition``."""

from __future__ import annotations


class StandardLayers:
    """Mixin holding the ``add_<layer>`` methods of the standard layers."""
