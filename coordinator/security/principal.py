"""Principals from client certificates: Kafka's `ssl.principal.mapping.rules` (KIP-371).

The subject DN is written as RFC 2253/4514 does (`CN=alice,OU=eng,O=acme`), the form
Java's `X500Principal.getName()` gives Kafka. Attributes without a standard short name
differ: cryptography writes the dotted OID with the value (`1.2.840.113549.1.9.1=a@x.io`),
Java a hex-encoded DER value; rules that match such attributes must be written for the
form printed here.

Rules, as Kafka reads them: a comma-separated list of `RULE:pattern/replacement/` with an
optional `L` or `U` (lower- or upper-case the result) and `DEFAULT` (the DN unchanged).
The first rule whose pattern matches the *whole* DN decides; `$1`-style references in
the replacement take the pattern's groups. When no rule matches, the connection cannot
be given a principal and is refused, as Kafka refuses it.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from cryptography import x509

_RULE = re.compile(r"\s*(?:(DEFAULT)|RULE:((?:\\/|[^/])*)/((?:\\/|[^/])*)/([LU])?)\s*(?:,|$)")
_JAVA_GROUP = re.compile(r"\$(\d+)")


class MappingRuleError(ValueError):
    """The rules cannot be read, or no rule applies to a DN."""


@dataclass(frozen=True, slots=True)
class _Rule:
    pattern: re.Pattern | None        # None: DEFAULT
    replacement: str = ""
    case: str | None = None

    def apply(self, dn: str) -> str | None:
        if self.pattern is None:
            return dn
        match = self.pattern.fullmatch(dn)
        if match is None:
            return None
        name = match.expand(self.replacement)
        return name.lower() if self.case == "L" else name.upper() if self.case == "U" else name


class PrincipalMapper:
    def __init__(self, rules: str = "DEFAULT"):
        self._rules = parse_rules(rules)

    def name(self, dn: str) -> str:
        for rule in self._rules:
            name = rule.apply(dn)
            if name is not None:
                return name
        raise MappingRuleError(f"no ssl_principal_mapping_rules rule applies to {dn!r}")

    def principal(self, der_certificate: bytes) -> str:
        dn = x509.load_der_x509_certificate(der_certificate).subject.rfc4514_string()
        return f"User:{self.name(dn)}"


def parse_rules(text: str) -> tuple[_Rule, ...]:
    rules, at = [], 0
    text = text.strip()
    while at < len(text):
        match = _RULE.match(text, at)
        if match is None or match.end() == at:
            raise MappingRuleError(f"cannot read ssl_principal_mapping_rules at {text[at:]!r}")
        default, pattern, replacement, case = match.groups()
        if default:
            rules.append(_Rule(None))
        else:
            try:
                compiled = re.compile(pattern.replace("\\/", "/"))
            except re.error as exc:
                raise MappingRuleError(f"bad pattern {pattern!r} in ssl_principal_mapping_rules: {exc}") from None
            python_replacement = _JAVA_GROUP.sub(r"\\g<\1>", replacement.replace("\\/", "/"))
            rules.append(_Rule(compiled, python_replacement, case))
        at = match.end()
    if not rules:
        raise MappingRuleError("ssl_principal_mapping_rules is empty")
    return tuple(rules)
