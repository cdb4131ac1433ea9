mod api;
mod browser;
mod control;
mod scene;
mod sse;
mod support;
mod web;
mod workers;
