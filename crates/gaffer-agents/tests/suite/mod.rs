mod acp;
mod claude;
mod codex;
mod support;
mod toolloop;
mod tools;
mod workspace;
