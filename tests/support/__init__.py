"""What the tests share, in one place: `waiting` (wait_for, the one way to wait on another thread or process),
`api` (the tenant API client and the requests most tests make), `fixtures` (the fixtures many modules use,
registered once by tests/conftest.py), `http` (a fake HTTP server on loopback, configured per test), `bench` (a
benchmark script as a module, for the harness tests), and the fakes and builders (`factories`, `fake_dns`,
`fake_llm`, `processes`, `realistic_usage`)."""
