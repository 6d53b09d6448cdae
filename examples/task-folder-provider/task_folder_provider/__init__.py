"""hostcore-task-folder: work items kept as TOML files in local folders.

The hostcore plugin is :mod:`task_folder_provider.plugin`; reading a folder of
task files is :mod:`task_folder_provider.tasks`, which knows nothing of hostcore.
"""

__version__ = "0.1.0"
