mod pipeline;
mod runs;
mod support;
mod workers;
