"""The peer of the first-page benchmark (bench/bench_browser.py): a bare Streamlit page, one metric and one Plotly
chart, served the same way as the app."""
import plotly.graph_objects as go
import streamlit as st

st.metric("Total parameters", "124,439,808")
st.plotly_chart(go.Figure(go.Bar(x=["embeddings", "attention", "FFN"], y=[39, 28, 57])))
