"""engine.job_queue: the limit holds under threads, first in first out, places and start estimates exact on a fake
clock, a full queue refuses with a message, cancelling and stopping leave cleanly."""
from __future__ import annotations

import threading

import pytest

from engine.job_queue import CANCELLED, DONE, RUNNING, WAITING, JobQueue, QueueFull


class Clock:
    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


def test_twenty_threads_never_exceed_the_limit_and_all_finish_in_order():
    queue, started, lock = JobQueue(limit=2, capacity=50), [], threading.Lock()
    release, tickets = threading.Event(), {}

    def job(i: int) -> None:
        ticket = tickets[i] = queue.enter(f"job {i}", 1.0)
        assert ticket.wait(timeout=60)
        with lock:
            started.append(i)
            assert queue.running <= 2
        release.wait(60)
        ticket.leave()

    threads = []
    for i in range(20):   # entered one by one, so the order of entry is the order of i
        threads.append(threading.Thread(target=job, args=(i,)))
        threads[-1].start()
        while queue.counts[RUNNING] + queue.waiting < i + 1:   # wait until job i has its ticket
            threading.Event().wait(0.001)
    release.set()
    for t in threads:
        t.join(60)
    assert sorted(started) == list(range(20))
    starts = [tickets[i].started_at for i in range(20)]
    assert starts == sorted(starts)                   # each started no earlier than the one that came before it
    assert queue.most_running == 2
    assert queue.counts == {RUNNING: 20, DONE: 20, CANCELLED: 0}
    assert queue.running == queue.waiting == 0


def test_places_and_start_estimates_on_a_fake_clock():
    clock = Clock()
    queue = JobQueue(limit=2, capacity=10, clock=clock)
    a, b = queue.enter("a", 10), queue.enter("b", 4)        # both run at t=0
    c, d, e = queue.enter("c", 5), queue.enter("d", 3), queue.enter("e", 1)
    assert [t.state for t in (a, b, c, d, e)] == [RUNNING, RUNNING, WAITING, WAITING, WAITING]
    assert [t.position for t in (a, b, c, d, e)] == [0, 0, 1, 2, 3]
    clock.now = 1.0
    # slots free at 3 (b) and 9 (a); c takes the first (3 -> 8), d the next free one (8 -> 11), e then 9
    assert (c.starts_in_s, d.starts_in_s, e.starts_in_s) == (3.0, 8.0, 9.0)
    b.leave()
    assert c.state == RUNNING and (d.position, e.position) == (1, 2)
    clock.now = 12.0                                        # past every estimate: overdue jobs count as ending now
    assert d.starts_in_s == 0.0 and e.starts_in_s == 0.0


def test_a_full_queue_refuses_with_the_numbers():
    queue = JobQueue(limit=1, capacity=2)
    queue.enter("run", 1), queue.enter("w1", 1), queue.enter("w2", 1)
    with pytest.raises(QueueFull, match="1 running and 2 waiting"):
        queue.enter("one too many", 1)


def test_cancel_and_stop_leave_the_line_and_the_next_starts():
    queue = JobQueue(limit=1, capacity=5)
    first, second, third = queue.enter("1", 1), queue.enter("2", 1), queue.enter("3", 1)
    second.cancel()
    assert second.state == CANCELLED and third.position == 1
    stop = threading.Event()
    stop.set()
    assert third.wait(stop) is False and third.state == CANCELLED   # a stop while waiting leaves the queue
    assert third.wait(timeout=0) is False
    first.leave()
    first.leave()                                                   # idempotent
    assert queue.counts == {RUNNING: 1, DONE: 1, CANCELLED: 2}
    assert queue.running == queue.waiting == 0


def test_wait_with_a_timeout_keeps_the_place():
    queue = JobQueue(limit=1, capacity=5)
    queue.enter("running", 1)
    waiting = queue.enter("waiting", 1)
    assert waiting.wait(timeout=0.01) is False
    assert waiting.state == WAITING and waiting.position == 1


def test_bad_limits_are_refused():
    with pytest.raises(ValueError, match="limit must be >= 1"):
        JobQueue(limit=0, capacity=1)
