mod claude;
mod support;
mod workspace;
