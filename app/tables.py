"""Pure table builders: engine results -> pandas DataFrames with display-ready columns (tested directly)."""
from __future__ import annotations

from typing import TYPE_CHECKING, Callable

import pandas as pd

from app.charts import COMPONENT_GROUP, LABELS
from engine.budget.flops import FlopBudget
from engine.budget.memory import MemoryBudget
from engine.budget.params import ParamCount
from engine.config import ModelConfig
from engine.units import fmt_count

if TYPE_CHECKING:
    from pandas.io.formats.style import Styler


def params_table(pc: ParamCount) -> pd.DataFrame:
    """One row per component: group, exact count with separators, share of the total; multi-token-prediction
    modules (DeepSeek-V3) on their own row after the total, as DeepSeek reports them: outside it."""
    rows = [{"component": LABELS[name], "group": LABELS.get(COMPONENT_GROUP[name], COMPONENT_GROUP[name]),
             "parameters": fmt_count(n), "share": f"{n / pc.total:.2%}"}
            for name, n in pc.components.items() if n]
    rows.append({"component": "total", "group": "", "parameters": fmt_count(pc.total), "share": "100.00%"})
    if pc.mtp:
        rows.append({"component": "multi-token prediction (not in the total)", "group": "extra modules",
                     "parameters": fmt_count(pc.mtp), "share": f"+{pc.mtp / pc.total:.2%}"})
    return pd.DataFrame(rows)


def formulas_table(budget: MemoryBudget | FlopBudget, fields: tuple[str, ...],
                   fmt: Callable[[float], str]) -> pd.DataFrame:
    """Each term of an engine budget with its value and the formula the engine reports for it."""
    return pd.DataFrame([{"term": f.removesuffix("_bytes").removesuffix("_flops").replace("_", " "),
                          "value": fmt(getattr(budget, f)), "formula": budget.formulas.get(f, "")}
                         for f in fields])


def measurements_table(rows: list[tuple]) -> pd.DataFrame:
    """(engine.measure.Measurement, formatter) rows: estimate beside measurement with the % error."""
    return pd.DataFrame([{"quantity": m.quantity, "estimate (closed form)": fmt(m.estimate),
                          "measured": fmt(m.measured), "error": f"{m.error_pct:+.2f}%", "how it was measured": m.method}
                         for m, fmt in rows])


def compare_table(configs: dict[str, ModelConfig]) -> tuple[pd.DataFrame, list[str]]:
    """Fields as rows, configs as columns (booleans and null as YAML writes them, numbers with thousands
    separators); and the fields that differ."""
    dicts = {label: cfg.to_dict() for label, cfg in configs.items()}
    fields = list(next(iter(dicts.values())))
    df = pd.DataFrame({label: [config_value(d[f]) for f in fields] for label, d in dicts.items()}, index=fields)
    differing = [f for f in fields if len({repr(d[f]) for d in dicts.values()}) > 1]
    return df, differing


def config_value(value: object) -> str:
    """A config field's value for people: booleans and null as YAML writes them, numbers with thousands
    separators (the Compare table and the handout)."""
    if value is None or isinstance(value, bool):
        return "null" if value is None else str(value).lower()
    return f"{value:,}" if isinstance(value, (int, float)) else str(value)


def highlight_rows(df: pd.DataFrame, rows: list[str], color: str = "#FFF3B0") -> Styler:
    """A Styler marking `rows` (st.dataframe renders it)."""
    return df.style.apply(lambda r: [f"background-color: {color}" if r.name in rows else ""] * len(r), axis=1)
