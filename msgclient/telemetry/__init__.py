"""OpenTelemetry for msgclient (the ``otel`` extra; docs/metrics.md).

``wiring`` is what the client imports: it imports no opentelemetry module, and starts
``metrics`` (observable instruments over the stats snapshots, a send-latency histogram)
and ``tracing`` / ``traced`` (a span per send and per receive, the W3C trace context in
the messages' properties) only for a client whose options ask for them.
"""
