mod deliver;
mod links;
mod support;
