"""Reminders: `/remind`, `/reminders` and the model's reminder tools; durable in halo.db, fired
by one timer, delivered through `Delivery` to the target's own DM without a model."""
