"""ASV front end: benchmark classes, plugins, runs, dashboard."""
