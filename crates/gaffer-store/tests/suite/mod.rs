mod copy;
mod counters;
mod crash;
mod journal;
mod schema;
mod support;
mod workload;
