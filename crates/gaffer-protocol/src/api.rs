//! HTTP API requests, responses and SSE events.
