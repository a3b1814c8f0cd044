"""The shared room: what several rooms need and none of them owns.

It sits below every other room (it imports nothing from the project), so the CLI, the REST
service and the search engine's suite script read the same settings without importing one
another: :mod:`common.settings` (``AILOWER_*`` environment variables and ``.env``).
"""
