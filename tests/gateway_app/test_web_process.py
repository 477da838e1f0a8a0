def test_a_call_sent_to_the_web_process_is_told_where_the_gateway_listens(client, settings):
    settings.ACE_GATEWAY_PORT = 8123
    answer = client.post("/gateway/oa/v1/chat/completions", data="{}", content_type="application/json")
    assert answer.status_code == 404
    assert "http://testserver:8123/gateway/oa/v1/chat/completions" in answer.json()["error"]["message"]
