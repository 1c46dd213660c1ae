"""The reference casino wallet: the casino's side of docs/operator-wallet.md as a small, real HTTP server
(SQLite store, signed requests, fault knobs), for integrators to read and for the tests to call."""
