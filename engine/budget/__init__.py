"""Closed-form budgets: parameters, memory and FLOPs computed from a ModelConfig without building a model."""
