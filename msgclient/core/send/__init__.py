"""The send path: routing, memory and pending limits, batching, the pending queue with its
send timeout, and the partition producer that drives them over an adapter's transport."""
