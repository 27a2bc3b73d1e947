"""Time and cost tables, charts and an HTML report from benchmark logs, next to the published studies."""
