"""One asyncio event loop on a daemon thread per process, shared by every SDK client in it."""

from __future__ import annotations

import asyncio
import atexit
import concurrent.futures
import contextlib
import os
import threading
import weakref


class EventLoop:
    """One asyncio loop on a daemon thread, per process."""

    _instance: EventLoop | None = None
    _lock = threading.Lock()

    def __init__(self):
        self.pid = os.getpid()
        self.loop = asyncio.new_event_loop()
        self.thread = threading.Thread(target=self.loop.run_forever, name="evalkit-models-loop", daemon=True)
        self.thread.start()
        # SDK clients built on this loop, closed at exit if their owner did not: an aiohttp
        # session collected open prints "Unclosed client session" to stderr.
        self.clients: weakref.WeakSet = weakref.WeakSet()
        atexit.register(self.close_clients)

    def close_clients(self) -> None:
        if self.pid != os.getpid():
            return
        for client in list(self.clients):
            with contextlib.suppress(Exception):
                asyncio.run_coroutine_threadsafe(client.close(), self.loop).result(5)

    @classmethod
    def get(cls) -> EventLoop:
        with cls._lock:
            if cls._instance is None or cls._instance.pid != os.getpid():
                cls._instance = cls()
            return cls._instance

    def run(self, coro):
        return self.submit(coro).result()

    def submit(self, coro) -> concurrent.futures.Future:
        return asyncio.run_coroutine_threadsafe(coro, self.loop)
