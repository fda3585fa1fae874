"""Pure table builders: engine results -> pandas DataFrames with display-ready columns (tested directly)."""
from __future__ import annotations

import pandas as pd

from app.charts import COMPONENT_GROUP, LABELS
from engine.budget.params import ParamCount
from engine.units import fmt_count


def params_table(pc: ParamCount) -> pd.DataFrame:
    """One row per component: group, exact count with separators, share of the total."""
    rows = [{"component": LABELS[name], "group": LABELS.get(COMPONENT_GROUP[name], COMPONENT_GROUP[name]),
             "parameters": fmt_count(n), "share": f"{n / pc.total:.2%}"}
            for name, n in pc.components.items() if n]
    rows.append({"component": "total", "group": "", "parameters": fmt_count(pc.total), "share": "100.00%"})
    return pd.DataFrame(rows)


def formulas_table(budget, fields: tuple[str, ...], fmt) -> pd.DataFrame:
    """Each term of an engine budget with its value and the formula the engine reports for it."""
    return pd.DataFrame([{"term": f.removesuffix("_bytes").removesuffix("_flops").replace("_", " "),
                          "value": fmt(getattr(budget, f)), "formula": budget.formulas.get(f, "")}
                         for f in fields])


def measurements_table(rows: list[tuple]) -> pd.DataFrame:
    """(engine.measure.Measurement, formatter) rows: estimate beside measurement with the % error."""
    return pd.DataFrame([{"quantity": m.quantity, "estimate (closed form)": fmt(m.estimate),
                          "measured": fmt(m.measured), "error": f"{m.error_pct:+.2f}%", "how it was measured": m.method}
                         for m, fmt in rows])
