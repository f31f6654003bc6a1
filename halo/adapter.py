"""What the composition root needs of a platform adapter."""

from __future__ import annotations

from typing import Any, Protocol


class Adapter(Protocol):
    """Translates between one platform and envelopes; knows nothing of the model.

    `start` returns once the adapter is running (polling, listening) in the background;
    `stop` finishes in-flight deliveries; `status` is shown by `/status`, so it holds JSON
    values only (times as ISO 8601 strings) and no secrets.
    """

    name: str

    async def start(self) -> None: ...

    async def stop(self) -> None: ...

    def status(self) -> dict[str, Any]: ...
