"""Names: Kafka's CamelCase spec names -> Python identifiers.

Field attributes are snake_case with an underscore before every capital
(``ThrottleTimeMs`` -> ``throttle_time_ms``, ``V3AndBelowTopics`` ->
``v3_and_below_topics``); this matches the attribute names kafka-python 3
uses for the same specs. Names that would clash with a keyword or with a
``Message`` method get a trailing underscore. Module names are the snake_case
message names.
"""

from __future__ import annotations

import keyword
import re

_RESERVED = frozenset({
    'encode', 'decode', 'to_bytes', 'from_bytes', 'is_flexible',
})


def snake(name: str) -> str:
    return re.sub(r'(?<!^)(?=[A-Z])', '_', name).lower()


def attr_name(field_name: str) -> str:
    name = snake(field_name)
    if keyword.iskeyword(name) or name in _RESERVED or name.startswith('_'):
        name += '_'
    return name


def module_name(message_name: str) -> str:
    return snake(message_name)
