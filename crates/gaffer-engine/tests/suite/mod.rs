mod pipeline;
mod rate_limits;
mod runs;
mod scan;
mod ship;
mod support;
mod workers;
