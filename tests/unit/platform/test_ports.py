"""ports: a port another process holds is one error naming the address; a port 0 or a free one is no error."""

import socket

import pytest

from croupier_platform.ports import AddressInUse, bind, check_free


def test_a_held_port_is_address_in_use_naming_it_and_a_free_one_is_not() -> None:
    with socket.socket() as holder:
        holder.bind(("127.0.0.1", 0))
        holder.listen()
        port = holder.getsockname()[1]
        with pytest.raises(AddressInUse) as refused:
            check_free(f"127.0.0.1:{port}")
        assert str(refused.value) == f"cannot listen on 127.0.0.1:{port}: the port is in use by another process"
        assert refused.value.address == f"127.0.0.1:{port}"
    check_free(f"127.0.0.1:{port}")  # released: free again
    check_free("127.0.0.1:0")


def test_a_host_not_of_this_machine_is_left_to_the_servers_own_bind_but_named_by_bind() -> None:
    check_free("192.0.2.1:50051")  # TEST-NET-1: never an address of this machine
    with pytest.raises(OSError, match=r"cannot listen on 192\.0\.2\.1:50051: .*is the host one of this machine's") as refused:
        bind("192.0.2.1:50051")
    assert not isinstance(refused.value, AddressInUse)
