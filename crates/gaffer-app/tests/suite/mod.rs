mod approvals;
mod audit;
mod grants;
mod projects;
mod redaction;
mod seed000;
mod support;
mod live;
