"""hostcore-directory-destination: the export stream as JSON Lines segments in a folder.

The plugin (the entry point) is :mod:`hostcore_directory_destination.plugin`; the
folder layout, durability and recovery rules are in
:mod:`hostcore_directory_destination.destination`.
"""
