"""The network: one connection per socket, the pool, lookups, TLS, backoff and the
(re)registration of producers and consumers, cluster failover."""
