"""Request handlers, one module per API family; importing this registers them all."""

from spool.broker.handlers import (  # noqa: F401
    admin,
    api_versions,
    configs,
    coordinator,
    fetch,
    list_offsets,
    metadata,
    produce,
)
