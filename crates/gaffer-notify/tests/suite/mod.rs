mod claims;
mod deliver;
mod links;
mod reach;
mod support;
