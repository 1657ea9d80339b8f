"""Optional integrations with web frameworks, each behind an extra.

Importing one whose library is missing raises ImportError naming the extra
to install (``pip install 'aioproducer[fastapi]'`` and so on). The metrics
exporters (Prometheus, OpenTelemetry) live in :mod:`aioproducer.telemetry`.
"""
