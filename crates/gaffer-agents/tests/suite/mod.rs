mod acp;
mod claude;
mod codex;
mod toolloop;
mod tools;
mod support;
mod workspace;
