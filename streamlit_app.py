"""Entry point for `streamlit run`: placeholder until the multipage app lands."""
import streamlit as st

from engine.budget.params import count_params
from engine.config import ModelConfig

st.set_page_config(page_title="Transformer Architecture Explorer", layout="wide")
st.title("Transformer Architecture Explorer")
cfg = ModelConfig()
st.metric("Parameters (GPT-2 small)", f"{count_params(cfg).total:,}")
