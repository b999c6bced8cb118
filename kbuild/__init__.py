"""kbuild: an incremental build system for a knowledge base, whose compiler is a language model."""

__version__ = "0.1.0"
