"""`make serve` (`python -m app.serve`): the app as a server for a class.

Headless, no file watcher, no usage statistics, listening on ADDRESS:PORT from the environment (defaults
0.0.0.0:8501; Hugging Face Spaces and most hosts set PORT). The upload bound and the rest of Streamlit's
settings live in .streamlit/config.toml, so Streamlit Community Cloud (which runs `streamlit run` itself) gets
them too. The heavy-job options (app.policy.OPTIONS) are flags here and environment variables for the app:

    python -m app.serve --jobs 1 --max-steps 200 --max-params 5000000
    EXPLORER_HEAVY=off make serve
"""
from __future__ import annotations

import argparse
import os
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

from app.policy import OPTIONS, PolicyError, policy

ROOT = Path(__file__).resolve().parents[1]
DEFAULT_ADDRESS, DEFAULT_PORT = "0.0.0.0", 8501


def streamlit_command(script: Path, address: str, port: int) -> list[str]:
    """The `streamlit run` command line of a served app (the benchmarks serve with it too)."""
    return [sys.executable, "-m", "streamlit", "run", str(script), "--server.headless", "true",
            "--server.address", address, "--server.port", str(port), "--server.fileWatcherType", "none",
            "--server.runOnSave", "false", "--browser.gatherUsageStats", "false"]


def wait_for_health(url: str, proc: subprocess.Popen | None, timeout_s: float = 300) -> bytes:
    """Poll a served app's health endpoint until it answers (its body); RuntimeError if `proc` (the server, when
    this machine runs it) exits first or the time runs out."""
    deadline = time.monotonic() + timeout_s
    while True:
        try:
            with urllib.request.urlopen(url + "/_stcore/health", timeout=2) as r:
                return r.read()
        except OSError:
            exited = proc is not None and proc.poll() is not None
            if exited or time.monotonic() > deadline:
                raise RuntimeError(f"the server at {url} did not answer"
                                   + (f" (exit {proc.poll()})" if exited else f" within {timeout_s:g} s")) from None
            time.sleep(0.25)


def _port(text: str) -> int:
    try:
        port = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a port number (1-65535)") from None
    if not 1 <= port <= 65535:
        raise argparse.ArgumentTypeError(f"{port} is not a port number (1-65535)")
    return port


def parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="python -m app.serve", description=__doc__.split("\n\n")[0])
    p.add_argument("--address", default=os.environ.get("ADDRESS") or DEFAULT_ADDRESS,
                   help=f"interface to listen on (env ADDRESS; default {DEFAULT_ADDRESS})")
    p.add_argument("--port", type=_port, default=os.environ.get("PORT") or str(DEFAULT_PORT),
                   help=f"port (env PORT; default {DEFAULT_PORT})")
    for opt in OPTIONS:
        p.add_argument(opt.flag, dest=opt.name, metavar=opt.env, help=f"{opt.help} (env {opt.env})")
    return p


def main(argv: list[str] | None = None) -> int:
    args = parser().parse_args(argv)
    env = dict(os.environ)
    env.update({opt.env: getattr(args, opt.name) for opt in OPTIONS if getattr(args, opt.name) is not None})
    try:
        policy(env)        # refuse a bad option here, with its name, rather than in every session
    except PolicyError as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    os.chdir(ROOT)         # Streamlit reads .streamlit/config.toml from the working directory
    cmd = streamlit_command(ROOT / "streamlit_app.py", args.address, args.port)
    os.execve(cmd[0], cmd, env)   # the server keeps this process id (what the classroom benchmark watches)


if __name__ == "__main__":
    sys.exit(main())
