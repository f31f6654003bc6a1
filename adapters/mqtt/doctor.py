"""`halo doctor`'s MQTT check: can halo log in to the broker and subscribe to its topics?"""

from __future__ import annotations

import asyncio
import ssl

import aiomqtt

from config.settings import MQTTSettings

TIMEOUT = 5.0


async def probe(settings: MQTTSettings) -> tuple[bool, str, str]:
    """(ok, what was found, what to fix). Uses `<client_id>-doctor` with a clean session."""
    where = f"broker {settings.host}:{settings.port}"
    tls = (
        ssl.create_default_context(cafile=str(settings.ca_certs) if settings.ca_certs else None)
        if settings.tls
        else None
    )
    client = aiomqtt.Client(
        settings.host or "",
        settings.port,
        username=settings.username,
        password=settings.password.get_secret_value() if settings.password else None,
        identifier=f"{settings.client_id}-doctor",
        clean_session=True,
        tls_context=tls,
        timeout=TIMEOUT,
    )
    try:
        async with asyncio.timeout(TIMEOUT * 2), client:
            for topic in settings.topics:
                await client.subscribe(settings.topic_prefix + topic, qos=1)
    except aiomqtt.MqttCodeError as exc:
        return False, f"{where} refused halo: {exc}", "check mqtt.username / mqtt.password and the broker's ACL"
    except (aiomqtt.MqttError, OSError, TimeoutError) as exc:
        return (
            False,
            f"{where} unreachable: {exc or type(exc).__name__}",
            "start the broker or fix mqtt.host / port / tls",
        )
    topics = ", ".join(settings.topics)
    return True, f"{where}: logged in and subscribed to {topics} (QoS 1, session {settings.client_id!r})", ""
