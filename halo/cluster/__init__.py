"""Several `halo serve` processes serving one family on PostgreSQL: each process is a node with
a heartbeat, a scope is served by the node holding its lease, a message for a scope another
node holds is handed over through PostgreSQL, and the singletons (chat apps' polling, MQTT,
schedules) run on the node holding the leader lease. Unused on the embedded store."""
