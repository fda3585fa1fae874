"""Transformer building blocks; each module picks its variant from a ModelConfig through a small registry."""
