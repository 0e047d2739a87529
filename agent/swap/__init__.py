"""The hot-swap: a new engine replaces the one serving without a failed request.

:mod:`.hotswap` runs admission → load → validate → journal → switch → drain → free;
:mod:`.admission` (pure) and :mod:`.headroom` (the adapter that measures memory) decide warm,
cold or refuse; :mod:`.budget` reserves memory for every engine the agent loads (swaps and
jobs) under one lock; :mod:`.validation` checks outputs against the reference; :mod:`.journal` keeps
crash-safe engine pointers; :mod:`.worker` runs each engine in a child process
(``swap_mode = worker_process``); :mod:`.loaders` picks the load function for a slot's
runtime and swap mode. Each step of a swap passes a named
checkpoint (:mod:`agent.checkpoints`).

May use: :mod:`agent.serving`, :mod:`agent.runtimes` and everything below them.
"""
