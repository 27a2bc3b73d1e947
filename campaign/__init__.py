"""The measurement campaign behind docs/results.md: the tools that ran and analysed the project's own GPU reference
measurements (logs/reference), kept out of the product. It sits above every product package: it may import
orchestrate, report, records and benchmarks; none of them imports it (`lint-imports`). Its dated notes on how the
reference runs were made are in campaign/notes/."""
