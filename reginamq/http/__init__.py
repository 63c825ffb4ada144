"""The HTTP face of the broker: a plain ASGI application speaking Queen's protocol."""
