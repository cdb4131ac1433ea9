mod pipeline;
mod runs;
mod support;
