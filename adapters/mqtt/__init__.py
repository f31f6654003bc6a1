"""Home events from the family's MQTT broker (Zigbee2MQTT, Frigate, OwnTracks, Home Assistant)."""

from adapters.mqtt.adapter import MqttAdapter

__all__ = ["MqttAdapter"]
