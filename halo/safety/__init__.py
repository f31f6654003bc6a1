"""Child safety: age profiles in effect, the risk floor and classifier, the guardrails that act on them."""
