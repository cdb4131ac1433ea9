mod copy;
mod counters;
mod crash;
mod discord;
mod journal;
mod schema;
mod support;
mod workload;
