"""One browser tab on Streamlit's own websocket protocol, without a browser: what the frontend sends and awaits.

The frontend opens `/_stcore/stream` (subprotocol "streamlit"), sends a BackMsg `rerun_script` with the page's
query string, and draws the ForwardMsgs that come back until `script_finished`. A widget change is another
`rerun_script` carrying the widget's new value under the id the server gave it (taken from the element's delta).
Like the frontend, a session tells the server which large messages it already holds (`cached_message_hashes`),
so a rerun that sends the same chart again sends only its hash.
"""
from __future__ import annotations

import asyncio
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Any, Coroutine

from streamlit.proto.BackMsg_pb2 import BackMsg
from streamlit.proto.ForwardMsg_pb2 import ForwardMsg
from websockets.asyncio.client import ClientConnection, connect

WIDGETS = ("number_input", "selectbox", "checkbox", "text_input", "slider", "radio", "toggle", "segmented_control",
           "button_group", "multiselect", "button")
FINISHED = (ForwardMsg.FINISHED_SUCCESSFULLY, ForwardMsg.FINISHED_FRAGMENT_RUN_SUCCESSFULLY)


@dataclass
class Run:
    """What one script run sent back."""
    seconds: float
    messages: int
    bytes: int
    texts: list[str] = field(default_factory=list)     # metric values, markdown and alert bodies, for checks
    exceptions: list[str] = field(default_factory=list)


class Session:
    """A student's tab: `await Session.open(url, query)`, then `await s.set_widget(label, value)`."""

    def __init__(self, ws: ClientConnection, query: str, page: str) -> None:
        self.ws, self.query, self.page = ws, query, page
        self.widgets: dict[str, tuple[str, str]] = {}    # label -> (widget id, kind)
        self.hashes: set[str] = set()

    @classmethod
    async def open(cls, url: str, query: str = "", page: str = "", timeout: float = 600) -> tuple[Session, Run]:
        """A new tab on `url`/`page` (a page's URL path such as "training"; "" is the default page)."""
        ws = await connect(url.replace("http", "ws", 1) + "/_stcore/stream", subprotocols=["streamlit"],
                           max_size=None, open_timeout=timeout, ping_interval=None)
        session = cls(ws, query, page)
        start = time.perf_counter()
        run = await session._rerun(BackMsg(), start, timeout)
        return session, run

    async def set_widget(self, label: str, value: int | float | str | bool, timeout: float = 600) -> Run:
        """Change one widget (found by its label) and wait for the script run it triggers to finish."""
        widget_id, kind = self.widgets[label]
        msg = BackMsg()
        state = msg.rerun_script.widget_states.widgets.add()
        state.id = widget_id
        if isinstance(value, bool):
            state.bool_value = value
        elif isinstance(value, int) and kind == "number_input":
            state.int_value = value
        elif isinstance(value, float):
            state.double_value = value
        else:
            state.string_value = str(value)
        return await self._rerun(msg, time.perf_counter(), timeout)

    async def rerun(self, timeout: float = 600) -> Run:
        """Run the page again with nothing changed (what a fragment's timer or a reload asks for)."""
        return await self._rerun(BackMsg(), time.perf_counter(), timeout)

    async def click(self, label: str, timeout: float = 600) -> Run:
        """Press a button (found by its label) and wait for the script run it triggers to finish."""
        msg = BackMsg()
        state = msg.rerun_script.widget_states.widgets.add()
        state.id = self.widgets[label][0]
        state.trigger_value = True
        return await self._rerun(msg, time.perf_counter(), timeout)

    async def _rerun(self, msg: BackMsg, start: float, timeout: float) -> Run:
        msg.rerun_script.query_string = self.query
        msg.rerun_script.page_name = self.page
        msg.rerun_script.cached_message_hashes.extend(sorted(self.hashes))
        msg.rerun_script.context_info.timezone = "UTC"
        msg.rerun_script.context_info.locale = "en-US"
        await self.ws.send(msg.SerializeToString())
        return await asyncio.wait_for(self._until_finished(start), timeout)

    async def _until_finished(self, start: float) -> Run:
        run = Run(0.0, 0, 0)
        while True:
            data = await self.ws.recv()
            run.messages += 1
            run.bytes += len(data)
            fwd = ForwardMsg()
            fwd.ParseFromString(data)
            kind = fwd.WhichOneof("type")
            if fwd.metadata.cacheable and fwd.hash:
                self.hashes.add(fwd.hash)
            if kind == "delta" and fwd.delta.WhichOneof("type") == "new_element":
                self._note(fwd.delta.new_element, run)
            elif kind == "page_info_changed":
                self.query = fwd.page_info_changed.query_string
            elif kind == "script_finished" and fwd.script_finished in FINISHED:
                run.seconds = time.perf_counter() - start
                return run

    def _note(self, element, run: Run) -> None:
        kind = element.WhichOneof("type")
        if kind in WIDGETS:
            widget = getattr(element, kind)
            self.widgets[widget.label] = (widget.id, kind)
        elif kind == "metric":
            run.texts.append(element.metric.body)
        elif kind == "markdown":
            run.texts.append(element.markdown.body)
        elif kind == "alert":
            run.texts.append(element.alert.body)
        elif kind == "exception":
            run.exceptions.append(f"{element.exception.type}: {element.exception.message}")

    async def close(self) -> None:
        await self.ws.close()


def run(coro: Coroutine[Any, Any, Any]) -> Any:
    """asyncio.run in a thread of its own: the caller's thread may already run an event loop (Playwright's sync
    API keeps one running in pytest's thread)."""
    with ThreadPoolExecutor(1) as pool:
        return pool.submit(asyncio.run, coro).result()
