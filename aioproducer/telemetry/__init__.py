"""What the producer tells about itself: metrics under the Java producer's names, and exporters.

* :mod:`.metrics`: the registry, with the Java client's windowed statistics
  (``org.apache.kafka.common.metrics``), pure and clock-free;
* :mod:`.producer_metrics`: the producer's sensors and gauges in Java's
  groups (``producer-metrics``, ``producer-topic-metrics``,
  ``producer-node-metrics``), fed by the engine and the connections;
* :mod:`.prometheus` and :mod:`.opentelemetry`: exporters of
  ``producer.metrics()`` (extras ``prometheus`` and ``opentelemetry``),
  imported only when asked for.

The registry and the producer's metrics sit low, beside ``config`` and
``errors``: the connections and the sender report into them. The exporters
read a producer only through ``metrics()``, so nothing here imports the facade.
"""
