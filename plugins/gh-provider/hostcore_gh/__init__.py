"""hostcore-gh: GitHub issues and pull requests as hostcore work items, via the ``gh`` CLI.

:mod:`hostcore_gh.runner` is the one place that runs ``gh``; other plugins that
talk to GitHub (the capture plugin) import it rather than running ``gh`` again.
"""
