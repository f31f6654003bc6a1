"""Several `halo serve` processes serving one family on PostgreSQL: one is active (it holds
the family lease and answers, polls and sends), the others are warm standbys that forward
what reaches them to it and take over when its lease lapses or its session ends. Each take
raises the family's epoch, and every write checks it (halo/storage/db.py's fence). Unused on
the embedded store."""
