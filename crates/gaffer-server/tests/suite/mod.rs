mod api;
mod browser;
mod sse;
mod support;
mod web;
mod workers;
