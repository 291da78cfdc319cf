"""Spark's automatic registration of ``format("msgclient")``.

When a session first needs a Python data source, Spark 4 imports every top-level module
named ``pyspark_*`` on the Python path and registers its ``DefaultSource``: installing
msgclient installs this module, so no ``spark.dataSource.register`` call is needed
(docs/spark.md).
"""

from msgclient.spark import MsgClientDataSource as DefaultSource

__all__ = ["DefaultSource"]
