mod pipeline;
mod rate_limits;
mod runs;
mod support;
mod workers;
