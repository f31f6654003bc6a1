"""The one place a home message leaves halo: through `Delivery`, which writes it to the
recipient scope's transcript and hands it to the adapter that owns the scope.

When the durable outbox lands (`Delivery.send(scope_id, text, kind=...)`), this is the only
line to change."""

from __future__ import annotations

from halo.family.delivery import Delivery


async def send_home_message(delivery: Delivery, scope_id: str, text: str) -> bool:
    """False when no adapter for the scope's platform is running."""
    return await delivery.send(scope_id, text)
