"""CLI subcommands: every module here has `register(subparsers)`; engine.cli discovers them."""
