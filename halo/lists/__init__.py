"""Shared lists: `/list` and the model's list tools. A list belongs to a scope: the family
group's are shared by the family, a DM's are private to its member."""
