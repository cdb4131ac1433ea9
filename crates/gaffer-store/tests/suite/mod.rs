mod copy;
mod crash;
mod journal;
mod schema;
mod support;
mod workload;
