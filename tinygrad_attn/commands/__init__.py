"""Subcommands of ``tinygrad-attn``: each module here adds one through ``add_parser``."""
