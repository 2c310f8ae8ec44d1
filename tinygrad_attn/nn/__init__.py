"""Modules: layers, multi-head attention, the transformer block and the tiny transformer."""

from .attention import LayerCache, MultiHeadAttention
from .folded import fold
from .layers import Dropout, Embedding, LayerNorm, Linear, RMSNorm, TiedHead
from .module import Module, Parameter
from .transformer import MLP, SwiGLU, TinyTransformer, TransformerBlock
from .transformer_config import TransformerConfig

__all__ = ["MLP", "Dropout", "Embedding", "fold", "LayerCache", "LayerNorm", "Linear", "Module",
           "MultiHeadAttention", "Parameter", "RMSNorm", "SwiGLU", "TiedHead", "TinyTransformer",
           "TransformerBlock", "TransformerConfig"]
