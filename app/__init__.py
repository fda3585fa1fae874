"""UI helpers for the Streamlit app: session state, the config editor, widgets, figure and diagram builders.
No engine logic lives here: every number comes from an `engine` function."""
