"""Heavy jobs on a shared server: one queue per server process (engine.job_queue), the teacher's limits
(app.policy), and how a page waits its turn.

Training runs and measured sweep columns run in threads that take a ticket first (TrainJob / SweepJob wait for
their turn); the Latency, Budgets and Activations measurements run in the script and wait in `turn`, which shows
the place in line and the expected start, and leaves the queue on any click (a click reruns the page).
"""
from __future__ import annotations

from contextlib import contextmanager
from typing import Iterator

import streamlit as st

from app.policy import OPTIONS, Policy, PolicyError, policy
from engine.job_queue import RUNNING, WAITING, JobQueue, QueuedJob, QueueFull, Ticket

_ENV = {opt.name: opt.env for opt in OPTIONS}


def server_policy() -> Policy:
    """The server's policy; an environment value it cannot take falls back to the defaults (app.serve refuses
    such values before the server starts)."""
    try:
        return policy()
    except PolicyError:
        return policy({})


@st.cache_resource(show_spinner=False)
def job_queue() -> JobQueue:
    """The one queue of this server process, shared by every session."""
    p = server_policy()
    return JobQueue(p.jobs, p.queue)


def refusal(params: int | None = None, steps: int | None = None) -> str | None:
    """Why this server will not run a heavy job of `params` parameters and `steps` training steps (None: it will)."""
    p = server_policy()
    if not p.heavy:
        return ("Heavy jobs (training, latency sweeps, measurements) are turned off on this server "
                f"({_ENV['heavy']}=off); the closed-form figures on every page still work.")
    if p.max_params is not None and params is not None and params > p.max_params:
        return (f"This model has {params:,} parameters; this server builds at most {p.max_params:,} for a heavy "
                f"job ({_ENV['max_params']}). Try the small size or fewer layers.")
    if p.max_steps is not None and steps is not None and steps > p.max_steps:
        return f"steps: {steps:,} is more than this server allows for one run ({p.max_steps:,}, {_ENV['max_steps']})."
    return None


def enter(label: str, estimate_s: float) -> Ticket | str:
    """A place in the server's queue, or the message saying why there is none (the queue is full)."""
    try:
        return job_queue().enter(label, estimate_s, owner=_session_id())
    except QueueFull as e:
        return str(e)


def status(ticket: Ticket) -> str:
    """The waiting job's place, the expected start and the server's limit, for st.info."""
    q = job_queue()
    return (f"Waiting for a free slot: place **{ticket.position}** of {q.waiting} in this server's queue, "
            f"expected to start in about **{_seconds(ticket.starts_in_s)}** ({q.limit} heavy "
            f"job{'s run' if q.limit > 1 else ' runs'} at once; {q.running} running now). Stop leaves the queue.")


def show_waiting(job: QueuedJob, nothing: str) -> bool:
    """A background job's place in the queue, or that it left it while waiting ("nothing was `nothing`"); True
    when it has not started, so the page has nothing more to draw for it."""
    if job.waiting:
        st.info(status(job.ticket), icon=":material/hourglass_top:")
    elif job.cancelled:
        st.warning(f"Stopped while waiting in the queue; nothing was {nothing}.", icon=":material/block:")
    return job.waiting or job.cancelled


def _seconds(s: float) -> str:
    return f"{s:,.0f} s" if s < 120 else f"{s / 60:,.1f} min"


def _session_id() -> str:
    from streamlit.runtime.scriptrunner import get_script_run_ctx
    ctx = get_script_run_ctx()
    return ctx.session_id if ctx is not None else ""


@contextmanager
def turn(label: str, estimate_s: float, params: int | None = None) -> Iterator[bool]:
    """For a job run in the script: refused (shown, False), or wait in line showing the place (any click reruns
    the page and so leaves the queue), then True while the job holds its slot."""
    why = refusal(params)
    ticket = enter(label, estimate_s) if why is None else why
    if isinstance(ticket, str):
        st.warning(ticket, icon=":material/block:")
        yield False
        return
    try:
        note = st.empty()
        while not ticket.wait(timeout=0.5):
            if ticket.state != WAITING:
                break
            note.info(status(ticket), icon=":material/hourglass_top:")   # a pending click stops the run here
        note.empty()
        yield ticket.state == RUNNING
    finally:
        ticket.leave()
