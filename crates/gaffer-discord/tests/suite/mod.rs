mod adapter;
mod crash;
mod ship;
mod steer;
mod support;
