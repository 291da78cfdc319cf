"""The receive path: the permit-based receive queue, ack grouping, negative acks, ack
timeouts, dead letters, listeners, and the partition consumer that drives them."""
