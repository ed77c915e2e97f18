"""kgc: a Kafka group coordinator that runs as its own service.

Layers, top to bottom; each imports only from those below it (`lint-imports` checks the
contracts in pyproject.toml; docs/ARCHITECTURE.md traces a request through them):

    cli                                   `kgc`: assembles the subcommands' parsers
    commands | bench                      the subcommands that run or call kgc (serve, demo, groups, import/export, credentials); `kgc bench`
    app | offline | embedded              wiring of the concrete classes; audit/compact/inspect
    settings                              ServerConfig and the settings schema
    service | net | gateway | http | probe   routing, sockets, forwarding, HTTP
    security                              credentials, TLS contexts, principals, ACLs
    runtime                               one serial executor per partition: decide, replay, append
    group | metrics | periodic            the group state machines (pure): group/classic | group/consumer
    common                                what runtime and groups agree on: Result, Reply, Slices, Timer
    records | partitioning | node | consumer_lag | version   __consumer_offsets records; placement; lag
    storage (package)                     the log on disk
    protocol (package)                    the Kafka wire
"""
