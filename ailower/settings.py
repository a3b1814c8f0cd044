"""ailower's settings; they live in the shared room :mod:`common.settings` (re-exported here).

The REST service and ``search.suite`` read the same settings from :mod:`common.settings` without
importing the CLI package.
"""

from common.settings import Settings, get_settings

__all__ = ["Settings", "get_settings"]
