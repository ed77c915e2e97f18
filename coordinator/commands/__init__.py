"""The `kgc` subcommands that run kgc or talk to it, one module each: `serve`, `demo`,
`groups`, `import`/`export` (`migrate`), `credentials`. Each module adds its parser (its
`add_*_parser`) and the handler the parser sets; `coordinator.cli` only assembles them.
The offline tools (`coordinator.offline`) and the benchmarks (`coordinator.bench`) keep
their parsers in their own packages, which `kgc serve` never imports."""
