"""`tamesu view`: a local web app over the results store, server-rendered, that loads nothing from the network."""
