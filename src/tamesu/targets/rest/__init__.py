"""The `rest` target: any HTTP agent, described by a request template and JSONPaths into its answer."""
