mod claude;
mod toolloop;
mod tools;
mod support;
mod workspace;
