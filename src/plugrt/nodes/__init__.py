"""The node protocol every step of an engine implements (standard operators and plugins alike)."""

from .base import Binding, InferredShapes, Node, Serialized
from .ports import BuildRequest, IOChoice, Port, ProfileDims

__all__ = ["Binding", "BuildRequest", "IOChoice", "InferredShapes", "Node", "Port", "ProfileDims", "Serialized"]
