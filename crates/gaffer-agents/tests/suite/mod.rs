mod acp;
mod claude;
mod codex;
mod sandbox;
mod support;
mod toolloop;
mod tools;
mod workspace;
