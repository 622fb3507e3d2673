"""The command line: `tamesu run` and the other commands, each in a module of its own, loaded when used."""
