"""The shared fake server records requests and replays scripted responses in order."""

import httpx

from tests.fakes.http_server import FakeHTTPServer, FakeResponse


def test_routes_replay_queue_and_record(fake_server: FakeHTTPServer) -> None:
    fake_server.route(
        "GET", "/x", [FakeResponse(status=429, headers={"Retry-After": "1"}), FakeResponse.json({"ok": 1})]
    )
    with httpx.Client(base_url=fake_server.url) as client:
        first = client.get("/x", params={"q": "deepseek"})
        second = client.get("/x")
        third = client.get("/x")
        missing = client.get("/nope")
    assert [first.status_code, second.status_code, third.status_code, missing.status_code] == [429, 200, 200, 404]
    assert first.headers["retry-after"] == "1"
    assert second.json() == {"ok": 1}
    assert fake_server.received("/x")[0].query == {"q": "deepseek"}
    assert len(fake_server.requests) == 4
