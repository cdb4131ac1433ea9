mod pipeline;
mod rate_limits;
mod runs;
mod ship;
mod support;
mod workers;
