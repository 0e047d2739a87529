"""The demo fleet: one controller and N simulated gateways as real processes, and the sample
models (generated in code, nothing downloaded) the demo, tests and benches push.
"""
