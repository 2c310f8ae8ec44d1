"""Text to token ids and back: a character vocabulary, and any Hugging Face ``tokenizer.json``
(byte-pair encoding trained here, or a pretrained model's). No tensors are needed at this layer."""

from .stream import TextStream
from .tokenizer import CharTokenizer, HuggingFaceTokenizer, load_tokenizer, tokenizer_from_json, visible

__all__ = ["CharTokenizer", "HuggingFaceTokenizer", "TextStream", "load_tokenizer", "tokenizer_from_json",
           "visible"]
