"""The commands a user runs against a cluster's API (machines, apps, deploy, volumes, jobs,
...) or offline (config, sim): each parses its flags, calls, and renders the answer.
"""

__all__: list[str] = []
