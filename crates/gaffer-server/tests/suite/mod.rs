mod api;
mod browser;
mod control;
mod sse;
mod support;
mod web;
mod workers;
