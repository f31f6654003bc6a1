"""The one place a home message leaves halo: through `Delivery`, halo's durable outbox, which
hands it to the adapter that owns the scope (retried there until it goes) and writes it to
the scope's transcript once sent."""

from __future__ import annotations

from halo.outbound.delivery import Delivery


async def send_home_message(delivery: Delivery, scope_id: str, text: str) -> bool:
    """False when no adapter for the scope's platform is running (nothing is queued then: the
    home store keeps the message and tries again on its next tick)."""
    if not delivery.can_send(scope_id):
        return False
    await delivery.send(scope_id, text, kind="proactive")
    return True
