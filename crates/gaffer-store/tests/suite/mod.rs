mod copy;
mod crash;
mod journal;
mod pg;
mod schema;
mod support;
mod workload;
