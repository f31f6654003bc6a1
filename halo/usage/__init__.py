"""What halo's model calls cost: usage as the provider reports it, prices, daily budgets."""
