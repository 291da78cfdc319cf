"""Apache Kafka wire protocol, spoken natively (sans-IO codecs plus asyncio adapter)."""
