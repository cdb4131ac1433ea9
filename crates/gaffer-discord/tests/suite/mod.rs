mod adapter;
mod crash;
mod ship;
mod support;
