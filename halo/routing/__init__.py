"""Cheap first: which model level answers a message, decided before any model is asked."""
