"""tamesu: test conversational AI agents the way their users meet them."""

__version__ = "0.1.0"
