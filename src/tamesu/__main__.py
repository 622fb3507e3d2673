from tamesu.cli import entry

entry()
