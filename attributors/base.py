"""The attributor interface: a failed `Trace` in, an `Attribution` out.

An attributor is any object with a `name`, a sync `attribute(trace)` and an
async `aattribute(trace)`. Subclass `BaseAttributor` to get one from the other.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
from typing import Protocol, runtime_checkable

from faultlens.middleware.model.trace import Attribution, Trace


@runtime_checkable
class Attributor(Protocol):
    name: str

    def attribute(self, trace: Trace) -> Attribution: ...

    async def aattribute(self, trace: Trace) -> Attribution: ...


class BaseAttributor:
    """Implement `attribute` (CPU-bound, offline methods) or `aattribute` (I/O-bound, LLM methods)."""

    name: str = "base"

    def attribute(self, trace: Trace) -> Attribution:
        if type(self).aattribute is BaseAttributor.aattribute:
            raise NotImplementedError(f"{type(self).__name__} implements neither attribute nor aattribute")
        try:
            asyncio.get_running_loop()
        except RuntimeError:
            return asyncio.run(self.aattribute(trace))
        # Called from inside a running event loop (a notebook, an async server):
        # asyncio.run would refuse, so the coroutine runs on a worker thread's own loop.
        with concurrent.futures.ThreadPoolExecutor(max_workers=1) as pool:
            return pool.submit(asyncio.run, self.aattribute(trace)).result()

    async def aattribute(self, trace: Trace) -> Attribution:
        if type(self).attribute is BaseAttributor.attribute:
            raise NotImplementedError(f"{type(self).__name__} implements neither attribute nor aattribute")
        return self.attribute(trace)
