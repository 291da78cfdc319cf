"""Apache Pulsar binary protocol, spoken natively (sans-IO codec plus asyncio adapter)."""
