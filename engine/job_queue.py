"""One first-in, first-out queue for a server's heavy jobs (training runs, latency sweeps, measured sweep columns,
measurements), with a limit on how many run at once.

A job takes a Ticket (`JobQueue.enter`, refused with QueueFull when `capacity` jobs already wait), waits for its
turn (`Ticket.wait`, which a stop event or `cancel` ends), runs, and leaves (`Ticket.leave`), which hands its slot
to the next in line. While it waits, `position` says its place (1 = next) and `starts_in_s` when it should start:
the running jobs' remaining estimated seconds and the estimates of the jobs ahead, packed onto the slots in order.
Threads only (stdlib); the app keeps one queue per server process.
"""
from __future__ import annotations

import itertools
import threading
import time
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Callable, Iterator

WAITING, RUNNING, DONE, CANCELLED = "waiting", "running", "done", "cancelled"


class QueueFull(Exception):
    """The queue already holds as many waiting jobs as it may; the message says how many and what to do."""


@dataclass(eq=False)
class Ticket:
    """One job's place: its label, estimated run time, owner (a session), state and times."""
    label: str
    estimate_s: float
    owner: str
    queue: "JobQueue" = field(repr=False)
    number: int = 0
    state: str = WAITING
    entered_at: float = 0.0
    started_at: float | None = None

    @property
    def position(self) -> int:
        """0 while running or finished; 1 for the next job to start, 2 after it, ..."""
        return self.queue.position(self)

    @property
    def starts_in_s(self) -> float:
        """Expected seconds until this job starts (0 once it runs)."""
        return self.queue.starts_in(self)

    def wait(self, stop: threading.Event | None = None, timeout: float | None = None, poll: float = 0.2) -> bool:
        """Block until the job may run (True). False: `timeout` passed (still waiting), or the job was cancelled
        or `stop` was set (then it has left the queue)."""
        return self.queue.wait(self, stop, timeout, poll)

    def leave(self) -> None:
        """Done or given up: free the slot (or the place in line). Idempotent."""
        self.queue.leave(self)

    def cancel(self) -> None:
        self.queue.leave(self, CANCELLED)


class JobQueue:
    def __init__(self, limit: int, capacity: int, clock: Callable[[], float] = time.monotonic):
        if limit < 1 or capacity < 0:
            raise ValueError(f"limit must be >= 1 and capacity >= 0, got {limit} and {capacity}")
        self.limit, self.capacity, self.clock = limit, capacity, clock
        self._cond = threading.Condition()
        self._waiting: list[Ticket] = []
        self._running: list[Ticket] = []
        self._numbers = itertools.count(1)
        self.most_running = 0                  # the largest number of jobs that ever ran at once
        self.counts = {RUNNING: 0, DONE: 0, CANCELLED: 0}   # jobs started, finished, cancelled so far

    def enter(self, label: str, estimate_s: float, owner: str = "") -> Ticket:
        with self._cond:
            if len(self._waiting) >= self.capacity and len(self._running) >= self.limit:
                raise QueueFull(f"The queue for heavy jobs is full: {len(self._running)} running and "
                                f"{len(self._waiting)} waiting (the most this server allows). Try again in a "
                                "minute, when some have finished.")
            ticket = Ticket(label, max(0.0, float(estimate_s)), owner, self, next(self._numbers),
                            entered_at=self.clock())
            self._waiting.append(ticket)
            self._promote()
            return ticket

    def _promote(self) -> None:
        while self._waiting and len(self._running) < self.limit:
            ticket = self._waiting.pop(0)
            ticket.state, ticket.started_at = RUNNING, self.clock()
            self._running.append(ticket)
            self.counts[RUNNING] += 1
        self.most_running = max(self.most_running, len(self._running))
        self._cond.notify_all()

    def wait(self, ticket: Ticket, stop: threading.Event | None, timeout: float | None, poll: float) -> bool:
        deadline = None if timeout is None else self.clock() + timeout
        with self._cond:
            while ticket.state == WAITING:
                if stop is not None and stop.is_set():
                    self._leave(ticket, CANCELLED)
                    return False
                left = None if deadline is None else deadline - self.clock()
                if left is not None and left <= 0:
                    return False
                self._cond.wait(poll if left is None else min(poll, left))
            return ticket.state == RUNNING

    def leave(self, ticket: Ticket, state: str = DONE) -> None:
        with self._cond:
            self._leave(ticket, state)

    def _leave(self, ticket: Ticket, state: str) -> None:
        if ticket in self._running:
            self._running.remove(ticket)
        elif ticket in self._waiting:
            self._waiting.remove(ticket)
            state = CANCELLED
        else:
            return
        ticket.state = state
        self.counts[state] += 1
        self._promote()

    def position(self, ticket: Ticket) -> int:
        with self._cond:
            return self._waiting.index(ticket) + 1 if ticket in self._waiting else 0

    def starts_in(self, ticket: Ticket) -> float:
        """Pack the running jobs' remaining estimates and the waiting jobs' estimates onto `limit` slots in order;
        the time `ticket`'s slot frees."""
        with self._cond:
            if ticket not in self._waiting:
                return 0.0
            now = self.clock()
            free = sorted(max(0.0, t.estimate_s - (now - t.started_at)) for t in self._running)
            free += [0.0] * (self.limit - len(free))
            for ahead in self._waiting:
                start = free.pop(0)
                if ahead is ticket:
                    return start
                free.append(start + ahead.estimate_s)
                free.sort()
            return 0.0   # unreachable: ticket is in _waiting

    @property
    def running(self) -> int:
        with self._cond:
            return len(self._running)

    @property
    def waiting(self) -> int:
        with self._cond:
            return len(self._waiting)


class QueuedJob:
    """What a background job (TrainJob, SweepJob) shares: an optional ticket, waited on in its thread (`turn`)."""
    ticket: Ticket | None = None
    cancelled = False               # stopped while it waited: it left the queue and did nothing
    stop: threading.Event

    @contextmanager
    def turn(self) -> Iterator[bool]:
        """Wait for the ticket's turn (no ticket: at once): True to run, False when stopped while waiting; the slot
        is freed when the block ends."""
        if self.ticket is None:
            yield True
            return
        try:
            self.cancelled = not self.ticket.wait(self.stop)
            yield not self.cancelled
        finally:
            self.ticket.leave()

    @property
    def waiting(self) -> bool:
        """Still in the queue, not yet started."""
        return self.ticket is not None and self.ticket.state == WAITING and not self.cancelled
