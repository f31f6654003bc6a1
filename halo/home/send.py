"""The one place a home message leaves halo: through `Delivery`, halo's durable outbox, which
hands it to the adapter that owns the scope (retried there until it goes) and writes it to
the scope's transcript once sent."""

from __future__ import annotations

from datetime import timedelta

from halo.outbound.asks import Asks, Option
from halo.outbound.delivery import Delivery

MUTE_ASK_LASTS = timedelta(hours=12)  # the alert's "mute 2 h" button; /mute typed works any time
MUTE_OPTIONS = [Option("Mute 2 h", "/mute 2h")]


async def send_home_message(
    delivery: Delivery, scope_id: str, text: str, asks: Asks | None = None, who: str | None = None
) -> bool:
    """False when no adapter for the scope's platform is running (nothing is queued then: the
    home store keeps the message and tries again on its next tick). With `asks`, the message
    carries a "mute 2 h" button that `who` (a member id, or the parents) may press."""
    if not delivery.can_send(scope_id):
        return False
    if asks is not None and who is not None:
        await asks.send(scope_id, text, MUTE_OPTIONS, who=who, ttl=MUTE_ASK_LASTS, kind="proactive")
    else:
        await delivery.send(scope_id, text, kind="proactive")
    return True
