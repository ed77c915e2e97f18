"""Error answers in each API's own shape: the row's `error_answer` (`protocol.apis`), whose
shapes live with the API's other answers in `protocol.answers`.

Where each API carries its errors (Kafka's `*Request.getErrorResponse`):

| API             | versions | where the code goes                                         |
|-----------------|----------|-------------------------------------------------------------|
| ApiVersions     | all      | top level, always a v0 body listing only ApiVersions' range |
| FindCoordinator | 0-3      | top level, node -1                                          |
|                 | 4+       | per requested key (`coordinators`), node -1                 |
| JoinGroup       | all      | top level; generation -1, protocol_name "" (v7+: null)      |
| Heartbeat       | all      | top level                                                   |
| LeaveGroup      | 0-2      | top level                                                   |
|                 | 3+       | top level, and per requested member                         |
| SyncGroup       | all      | top level, empty assignment                                 |
| OffsetCommit    | all      | per requested partition (there is no top-level code)        |
| OffsetFetch     | 0-1      | per requested partition, offset -1, metadata ""             |
|                 | 2-7      | top level, no topics                                        |
|                 | 8+       | per requested group, no topics                              |
| DescribeGroups  | all      | per requested group, state ""                               |
| ListGroups      | all      | top level, no groups                                        |
| DeleteGroups    | all      | per requested group                                         |
| OffsetDelete    | 0        | top level, no topics                                        |
| Metadata        | 0-12     | per requested topic, no brokers                             |
|                 | 13       | top level and per requested topic                           |
| ConsumerGroupHeartbeat | all | top level, with its message; epoch -1, no assignment   |
| ConsumerGroupDescribe  | all | per requested group, with its message                  |
| TxnOffsetCommit | all      | per requested partition (there is no top-level code)        |
| AddOffsetsToTxn | all      | top level                                                   |
| SaslHandshake   | all      | top level, no mechanisms                                    |
| SaslAuthenticate | all     | top level, with its message; no token                       |

Without the request (a version we could not decode), an API whose codes live only in
per-item entries has nowhere to put the code: `error_response` raises ValueError and the
caller closes the connection (Kafka 4 closes it for every version it does not serve).
"""

from __future__ import annotations

from kafka.protocol.api_key import ApiKey
from kafka.protocol.api_message import ApiMessage

from protocol.apis import APIS
from protocol.errors import ErrorCode


def error_response(api_key: int, version: int, request: ApiMessage | None, code: int,
                   message: str | None = None) -> ApiMessage:
    """`api_key`'s response at `version` carrying `code` wherever that API puts errors."""
    api = APIS.get(api_key)
    if api is None:
        raise KeyError(f"no error response for api key {api_key}")
    cls = api.response
    if not 0 <= version <= cls.max_version:
        raise ValueError(f"{cls.name} cannot be encoded at v{version} (codec range 0-{cls.max_version})")
    return api.error_answer(api, version, request, int(code), message)


def api_versions_error_response(code: int = ErrorCode.UNSUPPORTED_VERSION) -> ApiMessage:
    """KIP-511: the answer to an ApiVersions version above ours (encode it at `response.version`)."""
    return error_response(ApiKey.ApiVersions, 0, None, code)
