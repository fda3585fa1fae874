"""Measurements that hold the closed-form budgets to account: each returns estimate, measurement and % error."""
from __future__ import annotations

import math
from dataclasses import dataclass


@dataclass(frozen=True)
class Measurement:
    quantity: str          # what was compared, e.g. "activation bytes"
    estimate: float        # closed form
    measured: float        # what the run observed
    method: str            # how it was measured

    @property
    def error_pct(self) -> float:
        """(estimate - measured) / measured, in percent; 0 when both are 0."""
        if self.measured == 0:
            return 0.0 if self.estimate == 0 else math.inf
        return 100.0 * (self.estimate - self.measured) / self.measured

    def as_dict(self) -> dict:
        return {"quantity": self.quantity, "estimate": self.estimate, "measured": self.measured,
                "error_pct": self.error_pct, "method": self.method}
