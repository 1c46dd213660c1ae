"""A second server on a port in use fails to start (gRPC's SO_REUSEPORT off), naming the address."""

import asyncio

import grpc
import pytest

from croupier_platform.grpc_server import SERVER_OPTIONS, listen


def test_a_second_server_on_a_port_in_use_fails_naming_the_address() -> None:
    async def scenario() -> tuple[int, str]:
        first = grpc.aio.server(options=SERVER_OPTIONS)
        port = listen(first, "127.0.0.1:0")
        await first.start()
        second = grpc.aio.server(options=SERVER_OPTIONS)
        try:
            with pytest.raises(OSError) as refused:
                listen(second, f"127.0.0.1:{port}")
            return port, str(refused.value)
        finally:
            await second.stop(None)
            await first.stop(None)

    port, message = asyncio.run(scenario())
    assert f"cannot listen on 127.0.0.1:{port}: the port is in use" in message


def test_the_port_is_free_again_once_the_first_server_stopped() -> None:
    async def scenario() -> bool:
        first = grpc.aio.server(options=SERVER_OPTIONS)
        port = listen(first, "127.0.0.1:0")
        await first.start()
        await first.stop(None)
        second = grpc.aio.server(options=SERVER_OPTIONS)
        try:
            return listen(second, f"127.0.0.1:{port}") == port
        finally:
            await second.stop(None)

    assert asyncio.run(scenario())
