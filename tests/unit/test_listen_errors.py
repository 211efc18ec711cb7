"""A port in use names the address and the listener, for the Kafka listeners and the HTTP
endpoints alike (the broker prints it as one line: spool broker: <this>)."""

from __future__ import annotations

import asyncio
import socket

import pytest

from spool.broker.http_endpoint import HttpEndpoint
from spool.util.listen import ListenError


@pytest.fixture
def taken_port():
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    s.listen()
    yield s.getsockname()[1]
    s.close()


def test_an_http_endpoint_on_a_port_in_use(taken_port):
    endpoint = HttpEndpoint("metrics endpoint", "127.0.0.1", taken_port, {})
    with pytest.raises(ListenError) as e:
        asyncio.run(endpoint.start())
    assert str(e.value) == (f"cannot listen on 127.0.0.1:{taken_port} (metrics endpoint): "
                            "Address already in use")
