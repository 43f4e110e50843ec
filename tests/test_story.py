"""The user story, end to end through the MCP tools, in English and in Chinese."""

from __future__ import annotations

from datetime import datetime, timedelta

import pytest
from mcp import Client

from .conftest import call

pytestmark = pytest.mark.anyio

STORIES = {
    "english": {
        "old": "the service listens on 8080",
        "unrelated": "Alice prefers dark mode in her editor",
        "new": "the service listens on 9090",
        "reason": "the port moved to 9090 when the proxy was retired",
        "query": "which port?",
    },
    "chinese": {
        "old": "服务监听端口 8080",
        "unrelated": "团队每周五下午发布新版本",
        "new": "服务监听端口改为 9090",
        "reason": "代理下线后端口迁移到 9090",
        "query": "服务现在用哪个端口？",
    },
}


@pytest.mark.parametrize("language", STORIES)
async def test_the_port_story(client: Client, language: str) -> None:
    s = STORIES[language]
    old = (await call(client, "remember", text=s["old"]))["note"]
    unrelated = (await call(client, "remember", text=s["unrelated"]))["note"]
    corrected = await call(client, "correct", note_id=old["id"], text=s["new"], reason=s["reason"])
    new = corrected["note"]
    assert corrected["supersedes"] == old["id"]

    # recall: one chain, head 9090, history 8080 marked superseded with the reason
    recalled = await call(client, "recall_chains", query=s["query"])
    assert len(recalled["chains"]) == 1, recalled
    chain = recalled["chains"][0]
    assert [h["id"] for h in chain["heads"]] == [new["id"]] and chain["status"] == "current"
    (was,) = chain["history"]
    assert was["note"]["id"] == old["id"] and was["role"] == "superseded"
    assert was["by"] == new["id"] and was["reason"] == s["reason"]
    assert unrelated["id"] not in str(recalled)

    # the text an LLM reads says which is current and which is history
    result = await client.call_tool("recall_chains", {"query": s["query"]})
    text = result.content[0].text  # type: ignore[union-attr]
    now_line = next(line for line in text.splitlines() if "NOW" in line)
    history_line = next(line for line in text.splitlines() if "HISTORY" in line)
    assert s["new"] in now_line and s["old"] in history_line and s["reason"] in history_line

    # revoke the correction: 8080 is the head again
    revoked = await call(client, "revoke", note_id=new["id"], reason="9090 was never deployed")
    assert [h["id"] for h in revoked["chain"]["heads"]] == [old["id"]]
    recalled = await call(client, "recall_chains", query=s["query"])
    assert [h["id"] for h in recalled["chains"][0]["heads"]] == [old["id"]]

    # reinstate it: 9090 again, and its history says it was reinstated
    reinstated = await call(client, "reinstate", target_id=new["id"], reason="it was deployed after all")
    assert [h["id"] for h in reinstated["chain"]["heads"]] == [new["id"]]
    recalled = await call(client, "recall_chains", query=s["query"])
    head = recalled["chains"][0]["heads"][0]
    assert head["id"] == new["id"] and head["reinstated_by"] == reinstated["event"]["id"]

    # as of a time before the correction: 8080
    before = datetime.fromisoformat(new["recorded_at"]) - timedelta(milliseconds=1)
    replay = await call(client, "recall_chains", query=s["query"], as_of=before.isoformat())
    assert [[h["id"] for h in c["heads"]] for c in replay["chains"]] == [[old["id"]]]
    assert replay["chains"][0]["history"] == []

    # why_excluded(8080): superseded by the 9090 note at its time, with what stands in its place
    why = await call(client, "why_excluded", note_id=old["id"], query=s["query"])
    assert why["verdict"] == "history"
    state = next(r for r in why["reasons"] if r["stage"] == "state")
    assert new["id"] in state["detail"] and corrected["event"]["recorded_at"][:19] in state["detail"]
    assert [n["id"] for n in why["replaced_by"]] == [new["id"]]
