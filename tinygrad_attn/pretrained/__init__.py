"""Real models: Hugging Face folders (gpt2, llama, mistral, qwen2) loaded and saved, and our
own runs exported to that layout."""

from .loading import load_pretrained
from .saving import save_pretrained

__all__ = ["load_pretrained", "save_pretrained"]
