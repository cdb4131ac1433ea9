mod approvals;
mod audit;
mod grants;
mod live;
mod projects;
mod redaction;
mod seed000;
mod support;
