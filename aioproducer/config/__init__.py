"""Producer configuration: :class:`ProducerConfig` and the Java property names.

The settings and their checks are :mod:`.producer_config`; the names other
clients give the same settings and methods, for the hints of a misspelt
one, are :mod:`.foreign_names`.
"""

from .producer_config import (
    JAVA_PROPERTY_NAMES,
    ProducerConfig,
    check_setting_names,
    config_from_properties,
    unknown_setting_message,
)

__all__ = [
    "JAVA_PROPERTY_NAMES",
    "ProducerConfig",
    "check_setting_names",
    "config_from_properties",
    "unknown_setting_message",
]
