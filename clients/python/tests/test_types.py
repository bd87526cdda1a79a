"""The TypedDicts of turnledger.types mirror the served OpenAPI document: a
field added to, dropped from or made optional in a schema, and not here (or
the other way round), fails this test."""

from __future__ import annotations

import unittest
from typing import Any

from tests.serve import Serve

from turnledger import types as t


def _resolve(doc: dict[str, Any], s: dict[str, Any]) -> dict[str, Any]:
    while "$ref" in s:
        s = doc["components"]["schemas"][s["$ref"].rsplit("/", 1)[1]]
    if "anyOf" in s:  # X or null
        s = next(x for x in s["anyOf"] if x.get("type") != "null")
        return _resolve(doc, s)
    return s


def _op_response(doc: dict[str, Any], op: str) -> dict[str, Any]:
    for ops in doc["paths"].values():
        for o in ops.values():
            if isinstance(o, dict) and o.get("operationId") == op:
                return o["responses"]["200"]["content"]["application/json"]["schema"]
    raise KeyError(op)


def mirrors(doc: dict[str, Any]) -> dict[str, tuple[type, dict[str, Any]]]:
    S = doc["components"]["schemas"]
    R = lambda s: _resolve(doc, s)  # noqa: E731
    same = [
        "AgentRef", "TurnRef", "ClaimToken", "Meta", "Trace", "Backoff", "AgentSpec", "Provenance", "SuspendResult",
        "TurnOffer", "CredentialList", "IssuedCredential", "Profile", "ProfileSpec", "CredentialMaterial",
        "JoinInvite", "InviteCreated", "LineageItem", "ContextItem", "FeedItem", "Diagnostic", "AgentPage",
        "OfferPage", "TurnPage", "LineagePage", "ContextPage", "FeedPage", "ClaimResult", "RenewResult",
        "RecordResult", "ReconcileResult", "ReportResult", "Ok", "Health",
    ]
    m: dict[str, tuple[type, dict[str, Any]]] = {n: (getattr(t, n), S[n]) for n in same}
    m["Turn=TurnView"] = (t.Turn, S["TurnView"])
    m["Agent=AgentView"] = (t.Agent, S["AgentView"])
    m["Credential=CredentialView"] = (t.Credential, S["CredentialView"])
    m["Authority=TurnView.authority"] = (t.Authority, R(S["TurnView"]["properties"]["authority"]))
    m["ClaimView=TurnView.claim"] = (t.ClaimView, R(S["TurnView"]["properties"]["claim"]))
    m["AwaitingInput=TurnView.awaiting_input"] = (t.AwaitingInput, R(S["TurnView"]["properties"]["awaiting_input"]))
    m["AwaitingInputRequest=SuspendBody.awaiting_input"] = (t.AwaitingInputRequest, R(S["SuspendBody"]["properties"]["awaiting_input"]))
    m["Actor=FeedItem.actor"] = (t.Actor, R(S["FeedItem"]["properties"]["actor"]))
    m["BulkFilter=BulkBody.filter"] = (t.BulkFilter, R(S["BulkBody"]["properties"]["filter"]))
    m["WorkMemoryRecord=WorkMemoryReport.records"] = (t.WorkMemoryRecord, S["WorkMemoryReport"]["properties"]["records"]["items"])
    m["BulkStopResult=bulkStopTurns"] = (t.BulkStopResult, _op_response(doc, "bulkStopTurns"))
    m["BulkRetryResult=bulkRetryTurns"] = (t.BulkRetryResult, _op_response(doc, "bulkRetryTurns"))
    m["ProjectList=listProjects"] = (t.ProjectList, _op_response(doc, "listProjects"))
    m["Trends=getTrends"] = (t.Trends, _op_response(doc, "getTrends"))
    m["TrendPoint=getTrends.points"] = (t.TrendPoint, _op_response(doc, "getTrends")["properties"]["points"]["items"])
    return m


class TypesMirrorTheOpenAPIDocument(unittest.TestCase):
    def test_types_mirror_the_document(self) -> None:
        s = Serve()
        try:
            doc = s.admin().openapi()
        finally:
            s.close()
        for name, (td, schema) in mirrors(doc).items():
            with self.subTest(name):
                keys = set(td.__required_keys__) | set(td.__optional_keys__)  # type: ignore[attr-defined]
                props = set(schema.get("properties", {}))
                self.assertEqual(sorted(keys - props), [], f"{name}: fields the schema lacks")
                self.assertEqual(sorted(props - keys), [], f"{name}: schema fields the TypedDict lacks")
                self.assertEqual(sorted(td.__required_keys__), sorted(schema.get("required", [])),  # type: ignore[attr-defined]
                                 f"{name}: required fields differ")


if __name__ == "__main__":
    unittest.main()
