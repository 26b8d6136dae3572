"""Sync modes as strategies: one package per mode, reached through the registry only.

:mod:`.base` is the protocol the batch runner calls; :mod:`.registry` maps a table to its mode.
"""
