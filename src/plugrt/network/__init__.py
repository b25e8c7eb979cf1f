"""Network definition: tensors, layers and ``INetworkDefinition``."""
