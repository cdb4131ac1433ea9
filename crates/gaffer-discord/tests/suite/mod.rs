mod adapter;
mod support;
