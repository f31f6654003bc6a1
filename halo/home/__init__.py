"""Home events: MQTT observations → home rules → the right message to the right people."""
