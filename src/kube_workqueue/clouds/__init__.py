"""How each cloud store's official client is set up from the environment, where that is more
than the client does alone - one rule for every part that reaches the store (the ambassador's
source and the fetch-run-put worker), which both import this package and nothing else of each
other."""
