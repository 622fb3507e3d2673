"""The process tamesu is: child processes it starts, the signals that stop it, clean-up that a cancellation
cannot cut short, and the garbage collector paused while a plan is built."""
