"""tamesu's HTTP clients and servers: the clients every route to an agent or a model uses, size bounds, the
resend of a request a kept-alive connection lost, and serving an ASGI app on 127.0.0.1."""
