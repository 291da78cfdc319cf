"""Protocol-independent client machinery shared by the Pulsar and Kafka adapters."""
