"""attn: regenerate and verify the tables and figures of two texts on attention."""

__version__ = "0.1.0"
