from tamesu.cli.main import entry

entry()
