"""Every answer kgc shapes, per API and version: one module per family of APIs.

The group layer, the service, the authorizer and the connection decide *what* to answer
(a code, a member list, an assignment); the functions here decide *where each version
carries it*, so a field that moves between versions moves in one place. Each module
holds both the answer an API gives when it succeeds and its error answer (Kafka's
`*Request.getErrorResponse`), which `protocol.error_responses` picks through the table of
APIs (`protocol.apis`). They live in `protocol`, the bottom layer, because the group
state machines, the service and the connection all shape answers and may all import it.

| module         | APIs                                                        |
|----------------|-------------------------------------------------------------|
| `local`        | ApiVersions, Metadata (standalone)                          |
| `coordinator`  | FindCoordinator                                             |
| `classic`      | JoinGroup, SyncGroup, Heartbeat, LeaveGroup                 |
| `offsets`      | OffsetCommit (errors; the rest in `protocol.offset_commit_codec`), OffsetFetch, OffsetDelete |
| `admin`        | DescribeGroups, ListGroups, DeleteGroups                    |
| `consumer`     | ConsumerGroupHeartbeat, ConsumerGroupDescribe (KIP-848)     |
| `transactions` | TxnOffsetCommit, AddOffsetsToTxn                            |
| `sasl`         | SaslHandshake, SaslAuthenticate (their ILLEGAL_SASL_STATE)  |

An error answer is `(api, version, request, code, message)`: `api` is the API's row in
`protocol.apis`, `request` the decoded request or None when it could not be decoded.
"""
