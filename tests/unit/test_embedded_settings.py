"""The embedded PostgreSQL's buffer pool follows the machine's memory, within bounds."""

from reginamq.store.embedded import SERVER_SETTINGS, machine_memory, shared_buffers_mb

MB = 1 << 20


def test_the_buffer_pool_is_a_quarter_of_the_memory_between_128_mb_and_2_gb():
    assert shared_buffers_mb(256 * MB) == 128  # a small machine still gets a usable pool
    assert shared_buffers_mb(4096 * MB) == 1024
    assert shared_buffers_mb(6000 * MB) == 1500
    assert shared_buffers_mb(64 * 1024 * MB) == 2048  # a big one does not hand PostgreSQL a fortune


def test_the_server_is_started_with_the_pool_sized_for_this_machine():
    assert machine_memory() > 0
    assert SERVER_SETTINGS["shared_buffers"] == f"{shared_buffers_mb(machine_memory())}MB"
