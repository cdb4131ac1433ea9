mod api;
mod browser;
mod sse;
mod support;
