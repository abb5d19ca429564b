"""Reading live updates from a subscription."""

from __future__ import annotations

from typing import Any

import anyio
from mcp.client.subscriptions import Subscription


async def next_event(sub: Subscription, timeout: float = 3.0) -> Any:
    with anyio.fail_after(timeout):
        return await sub.__anext__()
