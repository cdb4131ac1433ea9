mod adapter;
mod crash;
mod support;
